package main

// The vectors command: deterministic wire vectors produced by memberlist
// 0.2.2's own encoders.  Every vector is checked before it is written: the
// hand-assembled packet/stream layering is compared with memberlist's real
// send functions (rawSendMsgPacket, rawSendMsgStream, sendLocalState) where
// 0.2.2 has them, and every message, packet and stream is decoded back with
// the decode command's code.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/hashicorp/memberlist"
)

type messageVector struct {
	Name    string  `json:"name"`
	Kind    string  `json:"kind"`
	Message Message `json:"message"`
	Hex     string  `json:"hex"`
}

type compoundVector struct {
	Name  string   `json:"name"`
	Kind  string   `json:"kind"`
	Parts []string `json:"parts"`
	Hex   string   `json:"hex"`
}

// bytesVector serves the lzw, compress and crc kinds.
type bytesVector struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Input string `json:"input"`
	Hex   string `json:"hex"`
}

type encryptVector struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Version uint8  `json:"version"`
	Key     string `json:"key"`
	AAD     string `json:"aad"`
	Nonce   string `json:"nonce"`
	Input   string `json:"input"`
	Hex     string `json:"hex"`
}

type packetVector struct {
	Name              string   `json:"name"`
	Kind              string   `json:"kind"`
	Messages          []string `json:"messages"`
	Compress          bool     `json:"compress"`
	CRC               bool     `json:"crc"`
	Keys              []string `json:"keys"`
	EncryptionVersion uint8    `json:"encryption_version"`
	Label             string   `json:"label"`
	Nonce             *string  `json:"nonce"`
	Hex               string   `json:"hex"`
}

type streamVector struct {
	Name              string   `json:"name"`
	Kind              string   `json:"kind"`
	Message           string   `json:"message"`
	Compress          bool     `json:"compress"`
	Keys              []string `json:"keys"`
	EncryptionVersion uint8    `json:"encryption_version"`
	Label             string   `json:"label"`
	Nonce             *string  `json:"nonce"`
	Hex               string   `json:"hex"`
}

// framing describes the optional layers of a packet or stream vector.
type framing struct {
	compress bool
	crc      bool // packets only
	keys     [][]byte
	vsn      uint8 // encryption version, used when keys are given
	label    string
	nonce    []byte // fixed nonce bytes (research-note vectors); nil = seeded
}

// generator collects vectors and stops at the first failure.
type generator struct {
	vectors []interface{}
	names   map[string]bool
	counts  map[string]int
	err     error
}

func (g *generator) fail(name string, format string, args ...interface{}) {
	if g.err == nil {
		g.err = fmt.Errorf("vector %s: %s", name, fmt.Sprintf(format, args...))
	}
}

func (g *generator) push(name, kind string, v interface{}) {
	if g.names[name] {
		g.fail(name, "duplicate name")
		return
	}
	g.names[name] = true
	g.counts[kind]++
	g.vectors = append(g.vectors, v)
}

func hexAll(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = hex.EncodeToString(b)
	}
	return out
}

func mustEncode(g *generator, name string, v interface{}) []byte {
	b, err := encodeValue(v)
	if err != nil {
		g.fail(name, "encode: %v", err)
	}
	return b
}

// message adds a message vector and checks Go decodes it back.
func (g *generator) message(name string, v interface{}) {
	wire := mustEncode(g, name, v)
	m, err := represent(v)
	if err != nil {
		g.fail(name, "%v", err)
		return
	}
	if ps, ok := v.(*PushPull); ok {
		g.checkLocalState(name, ps, wire)
	}
	d := &decoded{}
	if _, ok := v.(*UserStream); ok {
		err = d.stream(wire, nil, "")
	} else {
		err = decodeMessageRecovering(d, wire)
	}
	switch {
	case memberlist.VShortVsnPanics && crashesGo(v):
		// 0.2.2 encodes this happily but crashes when it processes it.
		if err == nil || !strings.HasPrefix(err.Error(), "panic: ") {
			g.fail(name, "expected 0.2.2 to panic processing it, got %v", err)
		}
	case err != nil:
		g.fail(name, "decoding it back: %v", err)
	default:
		g.sameMessages(name, d.msgs, []Message{m})
	}
	g.push(name, "message", messageVector{name, "message", m, hex.EncodeToString(wire)})
}

// crashesGo says whether 0.2.2 panics when it processes v: a Vsn of
// 1..5 bytes, which it indexes up to [5] without a length check.
func crashesGo(v interface{}) bool {
	short := func(vsn []byte) bool { return len(vsn) > 0 && len(vsn) < 6 }
	switch m := v.(type) {
	case *memberlist.VAlive:
		return short(m.Vsn)
	case *PushPull:
		for _, s := range m.States {
			if short(s.Vsn) {
				return true
			}
		}
	}
	return false
}

func decodeMessageRecovering(d *decoded, wire []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return d.message(wire)
}

// checkLocalState compares our push/pull encoding with sendLocalState's.
func (g *generator) checkLocalState(name string, ps *PushPull, wire []byte) {
	h, err := memberlist.NewVHarness(nil, 2, false)
	if err != nil {
		g.fail(name, "%v", err)
		return
	}
	got, err := h.LocalState(ps.States, ps.Join, ps.UserState)
	if err != nil {
		g.fail(name, "sendLocalState: %v", err)
	} else if !bytes.Equal(got, wire) {
		g.fail(name, "sendLocalState wrote %x, we built %x", got, wire)
	}
}

// normalize maps empty byte fields to null: go-msgpack 0.5.x leaves a []byte
// untouched (nil) when it decodes an empty raw string, so "" cannot survive
// a Go round trip.
func normalize(msgs []Message) []Message {
	byteFields := map[string]bool{"SourceAddr": true, "Target": true, "Payload": true,
		"Addr": true, "Meta": true, "Vsn": true, "Msg": true, "UserState": true}
	var fix func(map[string]interface{}) map[string]interface{}
	fix = func(f map[string]interface{}) map[string]interface{} {
		out := map[string]interface{}{}
		for k, v := range f {
			if s, ok := v.(string); ok && s == "" && byteFields[k] {
				v = nil
			}
			if states, ok := v.([]interface{}); ok {
				fixed := make([]interface{}, len(states))
				for i, s := range states {
					fixed[i] = fix(s.(map[string]interface{}))
				}
				v = fixed
			}
			out[k] = v
		}
		return out
	}
	res := make([]Message, len(msgs))
	for i, m := range msgs {
		res[i] = Message{m.Type, fix(m.Fields)}
	}
	return res
}

func (g *generator) sameMessages(name string, got, want []Message) {
	a, _ := json.Marshal(normalize(got))
	b, _ := json.Marshal(normalize(want))
	if !bytes.Equal(a, b) {
		g.fail(name, "decoded back as\n%s\nexpected\n%s", a, b)
	}
}

func (g *generator) compound(name string, values []interface{}) []byte {
	parts := make([][]byte, len(values))
	for i, v := range values {
		parts[i] = mustEncode(g, name, v)
	}
	wire := memberlist.VMakeCompound(parts)
	g.push(name, "compound", compoundVector{name, "compound", hexAll(parts), hex.EncodeToString(wire)})
	return wire
}

// lzw records the raw LZW stream memberlist's compressPayload produces (the
// Buf field of its compress struct).
func (g *generator) lzw(name string, input []byte) {
	wrapped, err := memberlist.VCompress(input)
	if err != nil {
		g.fail(name, "%v", err)
		return
	}
	var c memberlist.VCompressStruct
	if err := memberlist.VDecode(wrapped[1:], &c); err != nil {
		g.fail(name, "%v", err)
		return
	}
	g.push(name, "lzw", bytesVector{name, "lzw", hex.EncodeToString(input), hex.EncodeToString(c.Buf)})
}

func (g *generator) compressed(name string, input []byte) {
	wire, err := memberlist.VCompress(input)
	if err != nil {
		g.fail(name, "%v", err)
		return
	}
	back, err := memberlist.VDecompress(wire[1:])
	if err != nil || !bytes.Equal(back, input) {
		g.fail(name, "round trip failed: %v", err)
	}
	g.push(name, "compress", bytesVector{name, "compress", hex.EncodeToString(input), hex.EncodeToString(wire)})
}

// withCRC is what rawSendMsgPacket prepends for PMax >= 5 recipients.
func withCRC(msg []byte) []byte {
	out := make([]byte, 5, 5+len(msg))
	out[0] = memberlist.VHasCrcMsg
	binary.BigEndian.PutUint32(out[1:], crc32.ChecksumIEEE(msg))
	return append(out, msg...)
}

func (g *generator) crc(name string, input []byte) {
	g.push(name, "crc", bytesVector{name, "crc", hex.EncodeToString(input), hex.EncodeToString(withCRC(input))})
}

func (g *generator) encrypt(name string, vsn uint8, key, aad, input, fixedNonce []byte) {
	rng := seedNonces(name, fixedNonce)
	wire, err := memberlist.VEncrypt(vsn, key, input, aad)
	restoreRandom()
	if err != nil {
		g.fail(name, "%v", err)
		return
	}
	plain, err := memberlist.VDecrypt([][]byte{key}, append([]byte{}, wire...), aad)
	if err != nil || !bytes.Equal(plain, input) {
		g.fail(name, "round trip failed: %v", err)
	}
	g.push(name, "encrypt", encryptVector{name, "encrypt", vsn, hex.EncodeToString(key),
		hex.EncodeToString(aad), hex.EncodeToString(rng.served), hex.EncodeToString(input),
		hex.EncodeToString(wire)})
}

// labelHeader is upstream's [244][len][label] prefix (not in 0.2.2).
func labelHeader(label string) []byte {
	if label == "" {
		return nil
	}
	return append([]byte{memberlist.VHasLabelMsg, byte(len(label))}, label...)
}

func protocolFor(vsn uint8) uint8 {
	if vsn == 0 {
		return 1 // memberlist uses encryption version 0 only at protocol 1
	}
	return 2
}

// buildPacket layers a UDP packet in rawSendMsgPacket's order, adding
// upstream's label rules (label = AAD, header outermost).
func buildPacket(msg []byte, f framing) ([]byte, error) {
	if f.compress {
		c, err := memberlist.VCompress(msg)
		if err != nil {
			return nil, err
		}
		if len(c) < len(msg) { // Go keeps compression only if it helps
			msg = c
		}
	}
	if f.crc {
		msg = withCRC(msg)
	}
	if len(f.keys) > 0 {
		enc, err := memberlist.VEncrypt(f.vsn, f.keys[0], msg, []byte(f.label))
		if err != nil {
			return nil, err
		}
		msg = enc
	}
	return append(labelHeader(f.label), msg...), nil
}

// versionField is the encryption_version written to a vector: the version
// used, or memberlist's default (1) when the vector is not encrypted.
func versionField(f framing) uint8 {
	if len(f.keys) == 0 {
		return 1
	}
	return f.vsn
}

func nonceField(served []byte, keys [][]byte) *string {
	if len(keys) == 0 {
		return nil
	}
	s := hex.EncodeToString(served)
	return &s
}

func (g *generator) packet(name string, values []interface{}, f framing) {
	msgs := make([][]byte, len(values))
	want := make([]Message, len(values))
	for i, v := range values {
		msgs[i] = mustEncode(g, name, v)
		want[i], _ = represent(v)
	}
	payload := msgs[0]
	if len(msgs) > 1 {
		payload = memberlist.VMakeCompound(msgs)
	}
	rng := seedNonces(name, f.nonce)
	wire, err := buildPacket(payload, f)
	restoreRandom()
	if err != nil {
		g.fail(name, "%v", err)
		return
	}
	if f.label == "" {
		g.checkRealPacket(name, payload, f, wire)
	}
	g.checkDecoded(name, "packet", wire, f, want)
	g.push(name, "packet", packetVector{name, "packet", hexAll(msgs), f.compress, f.crc,
		hexAll(f.keys), versionField(f), f.label, nonceField(rng.served, f.keys), hex.EncodeToString(wire)})
}

// checkRealPacket sends the same payload through 0.2.2's rawSendMsgPacket
// with the same nonce stream and requires identical bytes.
func (g *generator) checkRealPacket(name string, payload []byte, f framing, want []byte) {
	h, err := memberlist.NewVHarness(f.keys, protocolFor(f.vsn), f.compress)
	if err != nil {
		g.fail(name, "%v", err)
		return
	}
	seedNonces(name, f.nonce)
	got, err := h.SendPacket(payload, f.crc)
	restoreRandom()
	if err != nil {
		g.fail(name, "rawSendMsgPacket: %v", err)
	} else if !bytes.Equal(got, want) {
		g.fail(name, "rawSendMsgPacket sent %x, we built %x", got, want)
	}
}

// checkDecoded runs the decode command's logic over a finished vector.
func (g *generator) checkDecoded(name, kind string, wire []byte, f framing, want []Message) {
	d := &decoded{}
	var err error
	if kind == "packet" {
		err = d.packet(wire, f.keys, f.label)
	} else {
		err = d.stream(wire, f.keys, f.label)
	}
	if err != nil {
		g.fail(name, "decoding it back: %v", err)
		return
	}
	g.sameMessages(name, d.msgs, want)
}

// buildStream layers a stream the way the dialer writes it: label header,
// then rawSendMsgStream's compress (always) and encrypt.
func buildStream(msg []byte, f framing) ([]byte, error) {
	if f.compress {
		c, err := memberlist.VCompress(msg)
		if err != nil {
			return nil, err
		}
		msg = c
	}
	if len(f.keys) > 0 {
		h, err := memberlist.NewVHarness(f.keys, protocolFor(f.vsn), f.compress)
		if err != nil {
			return nil, err
		}
		if msg, err = h.EncryptStream(msg, f.label); err != nil {
			return nil, err
		}
	}
	return append(labelHeader(f.label), msg...), nil
}

func (g *generator) stream(name string, v interface{}, f framing) {
	msg := mustEncode(g, name, v)
	want, _ := represent(v)
	rng := seedNonces(name, f.nonce)
	wire, err := buildStream(msg, f)
	restoreRandom()
	if err != nil {
		g.fail(name, "%v", err)
		return
	}
	if f.label == "" {
		g.checkRealStream(name, v, msg, f, wire)
	}
	g.checkDecoded(name, "stream", wire, f, []Message{want})
	g.push(name, "stream", streamVector{name, "stream", hex.EncodeToString(msg), f.compress,
		hexAll(f.keys), versionField(f), f.label, nonceField(rng.served, f.keys), hex.EncodeToString(wire)})
}

// checkRealStream compares with rawSendMsgStream, and for push/pull also
// with sendLocalState, under the same nonce stream.
func (g *generator) checkRealStream(name string, v interface{}, msg []byte, f framing, want []byte) {
	h, err := memberlist.NewVHarness(f.keys, protocolFor(f.vsn), f.compress)
	if err != nil {
		g.fail(name, "%v", err)
		return
	}
	seedNonces(name, f.nonce)
	got, err := h.SendStream(msg)
	restoreRandom()
	if err != nil || !bytes.Equal(got, want) {
		g.fail(name, "rawSendMsgStream wrote %x (%v), we built %x", got, err, want)
	}
	if ps, ok := v.(*PushPull); ok {
		seedNonces(name, f.nonce)
		got, err := h.LocalState(ps.States, ps.Join, ps.UserState)
		restoreRandom()
		if err != nil || !bytes.Equal(got, want) {
			g.fail(name, "sendLocalState wrote %x (%v), we built %x", got, err, want)
		}
	}
}

func generatorName() string {
	origin := "module proxy"
	if memberlist.VVersion == "0.2.2" {
		origin = "Debian golang-github-hashicorp-memberlist-dev"
	}
	return fmt.Sprintf("vigil-conformance (%s %s/%s), github.com/hashicorp/memberlist %s (%s), %s",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, memberlist.VVersion, origin, memberlist.VMsgpack)
}

// fileList is a repeatable file flag.
type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

// extraNote, when set, is appended to the notes (the -baseline summary).
var extraNote string

// notes describes how the vectors were made, for the header of the file.
func notes() []string {
	if memberlist.VVersion == "0.2.2" {
		return notes022
	}
	v := memberlist.VVersion
	return []string{
		"Messages, compounds, lzw, compress, crc and encrypt vectors are outputs of memberlist " + v + "'s own functions (encode, makeCompoundMessage, compressPayload, encryptPayload).",
		"Unlabelled packet and stream vectors are byte-checked against " + v + "'s rawSendMsgPacket / rawSendMsgStream / sendLocalState; labelled streams use its own encryptLocalState with the label as AAD.",
		"Nonces come from a deterministic reader seeded with the vector name; the *-doc-nonce vectors use nonce 000102030405060708090a0b like the research note.",
		"go-msgpack v2 writes a Go int above 127 (push/pull Nodes and UserStateLen, UserMsgLen) as a signed int16 or int32 (d1 00 c8 for 200, d2 00 01 00 00 for 65536), where go-msgpack 0.5.x writes the unsigned forms (cc c8, ce 00 01 00 00).",
	}
}

var notes022 = []string{
	"Messages, compounds, lzw, compress, crc and encrypt vectors are outputs of memberlist 0.2.2's own functions (encode, makeCompoundMessage, compressPayload, encryptPayload).",
	"Unlabelled packet and stream vectors are byte-checked against 0.2.2's rawSendMsgPacket / rawSendMsgStream / sendLocalState.",
	"Labels do not exist in 0.2.2: label headers and label AAD follow upstream v0.3.0+ rules, applied by vigil's own Go code around 0.2.2's primitives.",
	"Nonces come from a deterministic reader seeded with the vector name; the *-doc-nonce vectors use nonce 000102030405060708090a0b like the research note.",
	"go-msgpack 0.5.x decodes an empty raw string into a []byte as nil: Go reports empty Meta/Payload/Addr as null after a round trip.",
	"Compounds of 128..255 parts are what makeCompoundMessage writes (valid framing), but 0.2.2's decodeCompoundMessage computes numParts*2 in uint8 and mis-splits them.",
}

// writeVectors emits one vector per line so that diffs stay readable.
func writeVectors(w io.Writer, vectors []interface{}) error {
	bw := bufio.NewWriter(w)
	allNotes := notes()
	if extraNote != "" {
		allNotes = append(append([]string{}, allNotes...), extraNote)
	}
	head := map[string]interface{}{"generator": generatorName(), "notes": allNotes}
	h, err := marshal(head)
	if err != nil {
		return err
	}
	// Reopen the header object to append the vectors array.
	bw.Write(h[:len(h)-1])
	bw.WriteString(",\n\"vectors\": [\n")
	for i, v := range vectors {
		b, err := marshal(v)
		if err != nil {
			return err
		}
		bw.Write(b)
		if i < len(vectors)-1 {
			bw.WriteString(",")
		}
		bw.WriteString("\n")
	}
	bw.WriteString("]}\n")
	return bw.Flush()
}

func marshal(v interface{}) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// withoutBaselines drops the vectors that are byte for byte the same JSON as
// a vector in one of the baselines (other versions' vectors files), so that a
// version's file holds only what differs.  It returns the kept ones and the
// number dropped.
func withoutBaselines(vectors []interface{}, baselines []string) ([]interface{}, int, error) {
	seen := map[string]bool{}
	for _, baseline := range baselines {
		text, err := os.ReadFile(baseline)
		if err != nil {
			return nil, 0, err
		}
		var doc struct {
			Vectors []json.RawMessage `json:"vectors"`
		}
		if err := json.Unmarshal(text, &doc); err != nil {
			return nil, 0, fmt.Errorf("%s: %v", baseline, err)
		}
		for _, raw := range doc.Vectors {
			var buf bytes.Buffer
			if err := json.Compact(&buf, raw); err != nil {
				return nil, 0, err
			}
			seen[buf.String()] = true
		}
	}
	var kept []interface{}
	for _, v := range vectors {
		b, err := marshal(v)
		if err != nil {
			return nil, 0, err
		}
		if !seen[string(b)] {
			kept = append(kept, v)
		}
	}
	return kept, len(vectors) - len(kept), nil
}

func vectorsMain(args []string) {
	flags := flag.NewFlagSet("vectors", flag.ExitOnError)
	var baselines fileList
	flags.Var(&baselines, "baseline", "leave out vectors identical to one in this vectors file (repeatable)")
	flags.Parse(args)
	g := &generator{names: map[string]bool{}, counts: map[string]int{}}
	addAll(g)
	if g.err != nil {
		fmt.Fprintln(os.Stderr, "vigil-conformance vectors:", g.err)
		os.Exit(1)
	}
	total := len(g.vectors)
	if len(baselines) > 0 {
		kept, dropped, err := withoutBaselines(g.vectors, baselines)
		if err != nil {
			fmt.Fprintln(os.Stderr, "vigil-conformance vectors:", err)
			os.Exit(1)
		}
		g.vectors = kept
		names := make([]string, len(baselines))
		for i, b := range baselines {
			names[i] = filepath.Base(b)
		}
		extraNote = fmt.Sprintf("Only the vectors that differ from those in %s are written: %d of %d were identical to one there and are left out.",
			strings.Join(names, " and "), dropped, total)
	}
	if err := writeVectors(os.Stdout, g.vectors); err != nil {
		fmt.Fprintln(os.Stderr, "vigil-conformance vectors:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "vigil-conformance: %d vectors written of %d %v\n", len(g.vectors), total, g.counts)
}
