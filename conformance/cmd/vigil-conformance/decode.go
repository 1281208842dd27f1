package main

// The decode command: JSON cases on stdin, one JSON verdict per line on
// stdout, decoding with memberlist's own functions in the order Go's
// receive paths (ingestPacket/handleCommand, readStream/readRemoteState)
// apply them.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/hashicorp/memberlist"
)

// decodeCase is one input line.
type decodeCase struct {
	Name  string   `json:"name"`
	Kind  string   `json:"kind"`
	Hex   string   `json:"hex"`
	Keys  []string `json:"keys"`
	Label string   `json:"label"`
}

// decodeOK is the output for a case Go accepted.  truncated counts compound
// parts dropped for lack of bytes; trailing counts bytes Go left unread after
// complete messages (it ignores them).
type decodeOK struct {
	Name      string    `json:"name"`
	OK        bool      `json:"ok"`
	Layers    []string  `json:"layers"`
	Messages  []Message `json:"messages"`
	Truncated int       `json:"truncated"`
	Trailing  int       `json:"trailing"`
}

type decodeErr struct {
	Name  string `json:"name"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// decoded accumulates what one case peeled and found.
type decoded struct {
	layers    []string
	msgs      []Message
	truncated int
	trailing  int
}

func (d *decoded) add(v interface{}, trailing int) error {
	m, err := represent(v)
	if err != nil {
		return err
	}
	d.msgs = append(d.msgs, m)
	d.trailing += trailing
	return nil
}

func runDecode(in io.Reader, out io.Writer) error {
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	defer w.Flush()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for {
		line, err := r.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			if werr := enc.Encode(decodeLine(line)); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// decodeLine never panics: memberlist 0.2.2 does on some inputs (short Vsn,
// empty messages), and those are exactly the cases worth reporting.
func decodeLine(line []byte) (result interface{}) {
	var c decodeCase
	if err := json.Unmarshal(line, &c); err != nil {
		return decodeErr{Name: c.Name, Error: "bad input line: " + err.Error()}
	}
	defer func() {
		if p := recover(); p != nil {
			result = decodeErr{Name: c.Name, Error: fmt.Sprintf("panic: %v", p)}
		}
	}()
	d, err := decodeCaseBytes(c)
	if err != nil {
		return decodeErr{Name: c.Name, Error: err.Error()}
	}
	res := decodeOK{Name: c.Name, OK: true, Layers: d.layers, Messages: d.msgs,
		Truncated: d.truncated, Trailing: d.trailing}
	if res.Layers == nil {
		res.Layers = []string{}
	}
	if res.Messages == nil {
		res.Messages = []Message{}
	}
	return res
}

func decodeCaseBytes(c decodeCase) (*decoded, error) {
	buf, err := hex.DecodeString(c.Hex)
	if err != nil {
		return nil, fmt.Errorf("bad hex: %v", err)
	}
	keys := make([][]byte, len(c.Keys))
	for i, k := range c.Keys {
		if keys[i], err = hex.DecodeString(k); err != nil {
			return nil, fmt.Errorf("bad key hex: %v", err)
		}
		if n := len(keys[i]); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("key %d has %d bytes, memberlist accepts 16, 24 or 32", i, n)
		}
	}
	d := &decoded{}
	switch c.Kind {
	case "message":
		err = d.message(buf)
	case "packet":
		err = d.packet(buf, keys, c.Label)
	case "stream":
		err = d.stream(buf, keys, c.Label)
	default:
		err = fmt.Errorf("unknown kind %q", c.Kind)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// message decodes one bare message, type byte first.  Type 8 is read in its
// UDP form; the TCP form is reached through kind "stream".
func (d *decoded) message(buf []byte) error {
	if len(buf) == 0 {
		return errors.New("empty message")
	}
	switch t := buf[0]; t {
	case memberlist.VPushPullMsg, memberlist.VErrMsg:
		return d.streamBody(t, buf[1:])
	case memberlist.VCompoundMsg, memberlist.VCompressMsg, memberlist.VEncryptMsg,
		memberlist.VHasCrcMsg, memberlist.VHasLabelMsg:
		return fmt.Errorf("type %d (%s) is a framing layer, not a message", t, typeName(t))
	default:
		v, trailing, err := decodeStruct(t, buf[1:])
		if err != nil {
			return err
		}
		return d.add(v, trailing)
	}
}

// decodeStruct decodes the body of a UDP message type the way the
// handlers do (memberlist's decode over the bytes after the type byte).
func decodeStruct(t byte, body []byte) (v interface{}, trailing int, err error) {
	switch t {
	case memberlist.VPingMsg:
		v = &memberlist.VPing{}
	case memberlist.VIndirectPingMsg:
		v = &memberlist.VIndirectPingReq{}
	case memberlist.VAckRespMsg:
		v = &memberlist.VAckResp{}
	case memberlist.VNackRespMsg:
		v = &memberlist.VNackResp{}
	case memberlist.VSuspectMsg:
		v = &memberlist.VSuspect{}
	case memberlist.VAliveMsg:
		v = &memberlist.VAlive{}
	case memberlist.VDeadMsg:
		v = &memberlist.VDead{}
	case memberlist.VErrMsg:
		v = &memberlist.VErrResp{}
	case memberlist.VUserMsg:
		// handleUser hands the rest of the part to the delegate untouched.
		return &UDPUser{Msg: body}, 0, nil
	default:
		return nil, 0, fmt.Errorf("msg type (%d) not supported", t)
	}
	// VDecodeStreamValue is decode() plus a count of unread bytes.
	trailing, err = memberlist.VDecodeStreamValue(body, v)
	if err != nil {
		return nil, 0, fmt.Errorf("failed to decode %s: %v", typeName(t), err)
	}
	if a, ok := v.(*memberlist.VAlive); ok {
		// Surfaces 0.2.2's panic on a 1..5-byte Vsn (see README).
		if err := memberlist.VAliveCrashCheck(a); err != nil {
			return nil, 0, err
		}
	}
	return v, trailing, nil
}

// packet follows ingestPacket: label, decrypt, CRC, then handleCommand.
func (d *decoded) packet(buf []byte, keys [][]byte, label string) error {
	if len(buf) == 0 {
		// The UDP transport drops empty datagrams before memberlist sees them.
		return errors.New("empty packet")
	}
	buf, err := d.stripLabel(buf, label, "packet")
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		// Upstream passes the label as AAD; 0.2.2 passes nil, which GCM
		// treats like the empty label.  Failure drops the packet
		// (GossipVerifyIncoming, the default).
		plain, err := memberlist.VDecrypt(keys, buf, []byte(label))
		if err != nil {
			return fmt.Errorf("Decrypt packet failed: %v", err)
		}
		d.layers = append(d.layers, "encrypt")
		buf = plain
	}
	if len(buf) >= 5 && buf[0] == memberlist.VHasCrcMsg {
		want := binary.BigEndian.Uint32(buf[1:5])
		if got := crc32.ChecksumIEEE(buf[5:]); got != want {
			return fmt.Errorf("Got invalid checksum for UDP packet: %x, %x", got, want)
		}
		d.layers = append(d.layers, "crc")
		buf = buf[5:]
	}
	return d.handleCommand(buf)
}

// handleCommand mirrors memberlist's dispatcher: compound and compress
// recurse, everything else must be a message the UDP path accepts.  Like
// 0.2.2 it indexes buf[0] unchecked, so an empty part panics.
func (d *decoded) handleCommand(buf []byte) error {
	t := buf[0] // first, so an empty part panics like 0.2.2 does
	body := buf[1:]
	switch t {
	case memberlist.VCompoundMsg:
		d.layers = append(d.layers, "compound")
		trunc, parts, err := memberlist.VDecodeCompound(body)
		if err != nil {
			return fmt.Errorf("Failed to decode compound request: %v", err)
		}
		d.truncated += trunc
		for i, part := range parts {
			if err := d.handleCommand(part); err != nil {
				return fmt.Errorf("compound part %d: %v", i, err)
			}
		}
		return nil
	case memberlist.VCompressMsg:
		d.layers = append(d.layers, "compress")
		payload, err := memberlist.VDecompress(body)
		if err != nil {
			return fmt.Errorf("Failed to decompress payload: %v", err)
		}
		return d.handleCommand(payload)
	case memberlist.VPushPullMsg, memberlist.VErrMsg:
		// Stream-only types; handleCommand has no case for them.
		return fmt.Errorf("msg type (%d) not supported", t)
	}
	v, trailing, err := decodeStruct(t, body)
	if err != nil {
		return err
	}
	return d.add(v, trailing)
}

// stripLabel removes upstream's label header ([244][len 1..255][label]) and
// checks it against the expected label ("" = no header allowed).
func (d *decoded) stripLabel(buf []byte, want, what string) ([]byte, error) {
	got := ""
	if len(buf) > 0 && buf[0] == memberlist.VHasLabelMsg {
		if len(buf) < 2 {
			return nil, errors.New("cannot decode label; " + what + " has been truncated")
		}
		n := int(buf[1])
		if n < 1 {
			return nil, errors.New("label header cannot be empty when present")
		}
		if len(buf) < 2+n {
			return nil, errors.New("cannot decode label; " + what + " has been truncated")
		}
		got = string(buf[2 : 2+n])
		buf = buf[2+n:]
		d.layers = append(d.layers, "label")
	}
	if got != want {
		return nil, fmt.Errorf("discarding %s with unacceptable label %q", what, got)
	}
	return buf, nil
}

// stream follows readStream: label, [10 encrypt], [9 compress], message.
func (d *decoded) stream(buf []byte, keys [][]byte, label string) error {
	buf, err := d.stripLabel(buf, label, "stream")
	if err != nil {
		return err
	}
	h, err := memberlist.NewVHarness(keys, 2, false)
	if err != nil {
		return err
	}
	if len(buf) == 0 {
		return io.EOF // what the first Read returns; handleConn ignores it
	}
	t, rest := buf[0], buf[1:]
	if t == memberlist.VEncryptMsg {
		if !h.EncryptionEnabled() {
			return errors.New("Remote state is encrypted and encryption is not configured")
		}
		r := bytes.NewReader(rest)
		plain, err := h.DecryptStream(r, label)
		if err != nil {
			return err
		}
		d.layers = append(d.layers, "encrypt")
		d.trailing += r.Len()
		t, rest = plain[0], plain[1:] // 0.2.2 does not check for empty plaintext either
	} else if h.EncryptionEnabled() {
		return errors.New("Encryption is configured but remote state is not encrypted")
	}
	if t == memberlist.VCompressMsg {
		var c memberlist.VCompressStruct
		left, err := memberlist.VDecodeStreamValue(rest, &c)
		if err != nil {
			return err
		}
		decomp, err := memberlist.VDecompressBuffer(&c)
		if err != nil {
			return err
		}
		d.layers = append(d.layers, "compress")
		d.trailing += left
		t, rest = decomp[0], decomp[1:] // panics on empty, as 0.2.2 does
	}
	switch t {
	case memberlist.VPingMsg, memberlist.VAckRespMsg, memberlist.VPushPullMsg,
		memberlist.VUserMsg, memberlist.VErrMsg:
		return d.streamBody(t, rest)
	}
	return fmt.Errorf("received invalid msgType (%d)", t)
}

// streamBody decodes what follows the type byte of a stream message.
// ping/ack/err are single msgpack values; push_pull and user messages go
// through memberlist's readRemoteState / readUserMsg.
func (d *decoded) streamBody(t byte, body []byte) error {
	h, err := memberlist.NewVHarness(nil, 2, false)
	if err != nil {
		return err
	}
	switch t {
	case memberlist.VPushPullMsg:
		hdr, states, user, trailing, err := h.ReadRemoteState(body)
		if err != nil {
			return err
		}
		// mergeRemoteState's first step; panics on a 1..5-byte Vsn.
		h.VerifyProtocolCrashCheck(states)
		return d.add(&PushPull{Join: hdr.Join, Nodes: hdr.Nodes, UserLen: hdr.UserStateLen,
			States: states, UserState: user}, trailing)
	case memberlist.VUserMsg:
		hdr, msg, trailing, err := h.ReadUserMsg(body)
		if err != nil {
			return err
		}
		return d.add(&UserStream{UserMsgLen: hdr.UserMsgLen, Msg: msg}, trailing)
	}
	v, trailing, err := decodeStruct(t, body)
	if err != nil {
		return err
	}
	return d.add(v, trailing)
}

func decodeMain() {
	if err := runDecode(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "vigil-conformance decode:", err)
		os.Exit(1)
	}
}
