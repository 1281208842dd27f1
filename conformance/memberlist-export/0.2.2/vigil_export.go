// This file is not part of hashicorp/memberlist.  vigil's conformance
// build (conformance/build.sh) drops it into a private copy of the package so
// that the conformance tool can reach memberlist's unexported wire code.
//
// Rules followed here: wrappers call the real memberlist functions wherever
// one exists.  Where memberlist 0.2.2 has no equivalent (labels appeared in
// v0.3.0) the replacement is written next to the function it extends and is
// marked as vigil's own code.

package memberlist

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/ioutil"
	"log"
	"net"

	"github.com/hashicorp/go-msgpack/codec"
)

// Wire structs, exported under aliases so that a main package can fill and
// inspect them.  Field names are the msgpack map keys.
type (
	VPing            = ping
	VIndirectPingReq = indirectPingReq
	VAckResp         = ackResp
	VNackResp        = nackResp
	VErrResp         = errResp
	VSuspect         = suspect
	VAlive           = alive
	VDead            = dead
	VPushPullHeader  = pushPullHeader
	VUserMsgHeader   = userMsgHeader
	VPushNodeState   = pushNodeState
	VCompressStruct  = compress
)

// Message type bytes, as memberlist defines them.
const (
	VPingMsg         = uint8(pingMsg)
	VIndirectPingMsg = uint8(indirectPingMsg)
	VAckRespMsg      = uint8(ackRespMsg)
	VSuspectMsg      = uint8(suspectMsg)
	VAliveMsg        = uint8(aliveMsg)
	VDeadMsg         = uint8(deadMsg)
	VPushPullMsg     = uint8(pushPullMsg)
	VCompoundMsg     = uint8(compoundMsg)
	VUserMsg         = uint8(userMsg)
	VCompressMsg     = uint8(compressMsg)
	VEncryptMsg      = uint8(encryptMsg)
	VNackRespMsg     = uint8(nackRespMsg)
	VHasCrcMsg       = uint8(hasCrcMsg)
	VErrMsg          = uint8(errMsg)
)

// VHasLabelMsg is the label header type (upstream v0.3.0+, absent in 0.2.2).
const VHasLabelMsg = 244

// VEncode is memberlist's encode(): [type byte][msgpack body].
func VEncode(msgType uint8, in interface{}) ([]byte, error) {
	buf, err := encode(messageType(msgType), in)
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// VDecode is memberlist's decode() of a body (type byte already stripped).
func VDecode(body []byte, out interface{}) error {
	return decode(body, out)
}

// VMakeCompound is makeCompoundMessage.
func VMakeCompound(msgs [][]byte) []byte {
	return makeCompoundMessage(msgs).Bytes()
}

// VDecodeCompound is decodeCompoundMessage (input without the type byte 7).
func VDecodeCompound(body []byte) (truncated int, parts [][]byte, err error) {
	return decodeCompoundMessage(body)
}

// VCompress is compressPayload: [9][msgpack compress{Algo, Buf}].
func VCompress(in []byte) ([]byte, error) {
	buf, err := compressPayload(in)
	if err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// VDecompress is decompressPayload (input without the type byte 9).
func VDecompress(body []byte) ([]byte, error) {
	return decompressPayload(body)
}

// VDecompressBuffer is decompressBuffer, used by the stream reader.
func VDecompressBuffer(c *VCompressStruct) ([]byte, error) {
	return decompressBuffer(c)
}

// VEncrypt is encryptPayload; the nonce comes from crypto/rand.Reader,
// which the caller may replace to get reproducible output.
func VEncrypt(vsn uint8, key, msg, aad []byte) ([]byte, error) {
	var buf bytes.Buffer
	if err := encryptPayload(encryptionVersion(vsn), key, msg, aad, &buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// VDecrypt is decryptPayload: tries every key, returns the plaintext.
func VDecrypt(keys [][]byte, msg, aad []byte) ([]byte, error) {
	return decryptPayload(keys, msg, aad)
}

// VEncryptedLength is encryptedLength.
func VEncryptedLength(vsn uint8, n int) int {
	return encryptedLength(encryptionVersion(vsn), n)
}

// --- A minimal Memberlist for running the real send/receive code paths. ---

// VHarness wraps a Memberlist that has a config, a capturing transport and a
// capturing delegate, and nothing else.  It is only good for the methods
// below, which touch no other state.
type VHarness struct {
	m         *Memberlist
	transport *captureTransport
	delegate  *captureDelegate
}

// NewVHarness builds a harness.  keys: keyring (primary first), may be empty.
// protocolVersion 1 selects encryption version 0, anything else version 1.
// compression mirrors Config.EnableCompression.
func NewVHarness(keys [][]byte, protocolVersion uint8, compression bool) (*VHarness, error) {
	conf := DefaultLANConfig()
	conf.ProtocolVersion = protocolVersion
	conf.EnableCompression = compression
	// BindPort 0 keeps readRemoteState's "Port==0 -> BindPort" substitution
	// from changing anything we report.
	conf.BindPort = 0
	conf.GossipVerifyIncoming = true
	conf.GossipVerifyOutgoing = true
	conf.Logger = log.New(ioutil.Discard, "", 0)
	if len(keys) > 0 {
		ring, err := NewKeyring(keys, keys[0])
		if err != nil {
			return nil, err
		}
		conf.Keyring = ring
	}
	h := &VHarness{transport: &captureTransport{}, delegate: &captureDelegate{}}
	conf.Delegate = h.delegate
	h.m = &Memberlist{
		config:    conf,
		transport: h.transport,
		nodeMap:   map[string]*nodeState{},
		logger:    conf.Logger,
	}
	return h, nil
}

// SendPacket runs rawSendMsgPacket and returns the bytes handed to the
// transport.  crc=true passes a recipient with PMax 5, which is what makes
// Go add the [12][crc32] prefix.
func (h *VHarness) SendPacket(msg []byte, crc bool) ([]byte, error) {
	var node *Node
	if crc {
		node = &Node{Name: "peer", PMin: 1, PMax: 5, PCur: 2}
	}
	h.transport.written = nil
	addr := Address{Addr: "192.0.2.1:7946", Name: "peer"}
	if err := h.m.rawSendMsgPacket(addr, node, msg); err != nil {
		return nil, err
	}
	if len(h.transport.written) != 1 {
		return nil, fmt.Errorf("expected one packet, transport got %d", len(h.transport.written))
	}
	return h.transport.written[0], nil
}

// SendStream runs rawSendMsgStream and returns what it wrote to the conn.
func (h *VHarness) SendStream(msg []byte) ([]byte, error) {
	conn := &memConn{}
	if err := h.m.rawSendMsgStream(conn, msg); err != nil {
		return nil, err
	}
	return conn.out.Bytes(), nil
}

// LocalState runs sendLocalState (compression and encryption as configured)
// for a node table built from states and returns the stream bytes.  Go always
// sends a 6-byte Vsn built from the node's P*/D* fields, so states must carry
// a 6-byte Vsn.
func (h *VHarness) LocalState(states []VPushNodeState, join bool, userState []byte) ([]byte, error) {
	nodes := make([]*nodeState, len(states))
	for i, s := range states {
		if len(s.Vsn) != 6 {
			return nil, fmt.Errorf("state %d: sendLocalState needs a 6-byte Vsn", i)
		}
		nodes[i] = &nodeState{
			Node: Node{
				Name: s.Name, Addr: net.IP(s.Addr), Port: s.Port, Meta: s.Meta,
				PMin: s.Vsn[0], PMax: s.Vsn[1], PCur: s.Vsn[2],
				DMin: s.Vsn[3], DMax: s.Vsn[4], DCur: s.Vsn[5],
			},
			Incarnation: s.Incarnation,
			State:       s.State,
		}
	}
	h.m.nodes = nodes
	h.delegate.localState = userState
	defer func() { h.m.nodes = nil; h.delegate.localState = nil }()
	conn := &memConn{}
	if err := h.m.sendLocalState(conn, join); err != nil {
		return nil, err
	}
	return conn.out.Bytes(), nil
}

// VEncodePushPull builds [6][header][states...][user state] the way
// sendLocalState does (one encoder, values written back to back), but for any
// state contents, e.g. a short Vsn that sendLocalState cannot produce.
func VEncodePushPull(join bool, states []VPushNodeState, userState []byte) ([]byte, error) {
	var out bytes.Buffer
	out.WriteByte(byte(pushPullMsg))
	hd := codec.MsgpackHandle{}
	enc := codec.NewEncoder(&out, &hd)
	header := pushPullHeader{Nodes: len(states), UserStateLen: len(userState), Join: join}
	if err := enc.Encode(&header); err != nil {
		return nil, err
	}
	for i := range states {
		if err := enc.Encode(&states[i]); err != nil {
			return nil, err
		}
	}
	out.Write(userState)
	return out.Bytes(), nil
}

// VEncodeUserStream builds [8][msgpack userMsgHeader][raw] as sendUserMsg does.
func VEncodeUserStream(msg []byte) ([]byte, error) {
	var out bytes.Buffer
	out.WriteByte(byte(userMsg))
	hd := codec.MsgpackHandle{}
	enc := codec.NewEncoder(&out, &hd)
	if err := enc.Encode(&userMsgHeader{UserMsgLen: len(msg)}); err != nil {
		return nil, err
	}
	out.Write(msg)
	return out.Bytes(), nil
}

// EncryptStream is encryptLocalState extended with upstream's stream label:
// [10][len u32 BE][encrypted], AAD = the 5 header bytes followed by the
// label.  With label == "" it calls the real 0.2.2 encryptLocalState.
func (h *VHarness) EncryptStream(plain []byte, label string) ([]byte, error) {
	if label == "" {
		return h.m.encryptLocalState(plain)
	}
	// vigil's own code: 0.2.2 has no labels.
	vsn := h.m.encryptionVersion()
	header := make([]byte, 5, 5+encryptedLength(vsn, len(plain)))
	header[0] = byte(encryptMsg)
	binary.BigEndian.PutUint32(header[1:], uint32(encryptedLength(vsn, len(plain))))
	aad := append(append([]byte{}, header...), label...)
	buf := bytes.NewBuffer(header)
	if err := encryptPayload(vsn, h.m.config.Keyring.GetPrimaryKey(), plain, aad, buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// EncryptionEnabled is Config.EncryptionEnabled.
func (h *VHarness) EncryptionEnabled() bool {
	return h.m.config.EncryptionEnabled()
}

// DecryptStream reads the rest of an encryptMsg (the type byte 10 has been
// consumed) from r and decrypts it.  With label == "" this is the real 0.2.2
// decryptRemoteState; with a label it is vigil's own copy that appends the
// label to the AAD, as upstream v0.3.0+ does.
func (h *VHarness) DecryptStream(r io.Reader, label string) ([]byte, error) {
	if label == "" {
		return h.m.decryptRemoteState(r)
	}
	// vigil's own code, same steps and limit as decryptRemoteState.
	header := []byte{byte(encryptMsg), 0, 0, 0, 0}
	if _, err := io.ReadFull(r, header[1:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(header[1:])
	if n > maxPushStateBytes {
		return nil, fmt.Errorf("Remote node state is larger than limit (%d)", n)
	}
	blob := make([]byte, n)
	if _, err := io.ReadFull(r, blob); err != nil {
		return nil, err
	}
	aad := append(header, label...)
	return decryptPayload(h.m.config.Keyring.GetKeys(), blob, aad)
}

// newStreamDecoder is the msgpack decoder memberlist's stream reader puts on
// r, from this version's go-msgpack (vigil_export_shared.go uses it).
func newStreamDecoder(r io.Reader) *codec.Decoder {
	return codec.NewDecoder(r, &codec.MsgpackHandle{})
}
