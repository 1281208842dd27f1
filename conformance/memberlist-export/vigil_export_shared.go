// This file is not part of hashicorp/memberlist.  It holds the part of
// vigil's exported wrappers (see vigil_export.go) that is the same for every
// memberlist version the conformance build uses: conformance/build.sh copies
// memberlist-export/*.go beside the version's own vigil_export.go (0.2.2/ or
// 0.5-0.7/) into the private copy of the package.  The one thing that differs
// here, go-msgpack's import path, stays behind newStreamDecoder, which each
// version's vigil_export.go defines.

package memberlist

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"time"
)

// ReadRemoteState runs the real readRemoteState over body (the bytes after
// the pushPull type byte).  The header is decoded a second time, separately,
// so the caller can report its raw values (readRemoteState hides them), and
// absurd counts are refused before Go would allocate for them.
func (h *VHarness) ReadRemoteState(body []byte) (hdr VPushPullHeader, states []VPushNodeState, userState []byte, trailing int, err error) {
	if err = decode(body, &hdr); err != nil {
		return
	}
	// Every state is at least one msgpack byte, the user state is raw bytes:
	// a header promising more than is left cannot succeed in Go either (it
	// would fail with EOF after allocating), so stop before allocating.
	if hdr.Nodes > len(body) || hdr.UserStateLen > len(body) {
		err = fmt.Errorf("vigil guard: header promises Nodes=%d UserStateLen=%d but only %d bytes follow the type byte (Go would fail reading with EOF)",
			hdr.Nodes, hdr.UserStateLen, len(body))
		return
	}
	r := bytes.NewReader(body)
	dec := newStreamDecoder(r)
	_, states, userState, err = h.m.readRemoteState(r, dec)
	trailing = r.Len()
	return
}

// ReadUserMsg runs the real readUserMsg over body (bytes after the type byte
// 8 of a stream) and returns the header and what reached the delegate.
func (h *VHarness) ReadUserMsg(body []byte) (hdr VUserMsgHeader, msg []byte, trailing int, err error) {
	if err = decode(body, &hdr); err != nil {
		return
	}
	if hdr.UserMsgLen > len(body) {
		err = fmt.Errorf("vigil guard: header promises UserMsgLen=%d but only %d bytes follow the type byte (Go would fail reading with EOF)",
			hdr.UserMsgLen, len(body))
		return
	}
	h.delegate.msgs = nil
	r := bytes.NewReader(body)
	dec := newStreamDecoder(r)
	if err = h.m.readUserMsg(r, dec); err != nil {
		return
	}
	trailing = r.Len()
	switch len(h.delegate.msgs) {
	case 0:
		// readUserMsg only calls the delegate when UserMsgLen > 0.
	case 1:
		msg = h.delegate.msgs[0]
	default:
		err = errors.New("delegate received more than one message")
	}
	return
}

// VDecodeStreamValue decodes one msgpack value from the front of body the
// way the stream reader's decoder does, returning how many bytes are left.
func VDecodeStreamValue(body []byte, out interface{}) (trailing int, err error) {
	r := bytes.NewReader(body)
	dec := newStreamDecoder(r)
	err = dec.Decode(out)
	return r.Len(), err
}

// captureTransport records packets instead of sending them.
type captureTransport struct {
	written [][]byte
}

var _ NodeAwareTransport = (*captureTransport)(nil)

func (t *captureTransport) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return net.IPv4(192, 0, 2, 2), 7946, nil
}
func (t *captureTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	t.written = append(t.written, append([]byte{}, b...))
	return time.Time{}, nil
}
func (t *captureTransport) WriteToAddress(b []byte, addr Address) (time.Time, error) {
	return t.WriteTo(b, addr.Addr)
}
func (t *captureTransport) PacketCh() <-chan *Packet { return nil }
func (t *captureTransport) DialTimeout(string, time.Duration) (net.Conn, error) {
	return nil, errors.New("captureTransport cannot dial")
}
func (t *captureTransport) DialAddressTimeout(Address, time.Duration) (net.Conn, error) {
	return nil, errors.New("captureTransport cannot dial")
}
func (t *captureTransport) StreamCh() <-chan net.Conn { return nil }
func (t *captureTransport) Shutdown() error           { return nil }
func (t *captureTransport) IngestPacket(net.Conn, net.Addr, time.Time, bool) error {
	return errors.New("not supported")
}
func (t *captureTransport) IngestStream(net.Conn) error { return errors.New("not supported") }

// captureDelegate supplies user state to sendLocalState and records what
// readUserMsg delivers.
type captureDelegate struct {
	localState []byte
	msgs       [][]byte
}

func (d *captureDelegate) NodeMeta(int) []byte                 { return nil }
func (d *captureDelegate) NotifyMsg(b []byte)                  { d.msgs = append(d.msgs, b) }
func (d *captureDelegate) GetBroadcasts(int, int) [][]byte     { return nil }
func (d *captureDelegate) LocalState(bool) []byte              { return d.localState }
func (d *captureDelegate) MergeRemoteState(buf []byte, _ bool) {}

// memConn is a write-only in-memory net.Conn for the stream send paths.
type memConn struct {
	out bytes.Buffer
}

func (c *memConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (c *memConn) Write(b []byte) (int, error)      { return c.out.Write(b) }
func (c *memConn) Close() error                     { return nil }
func (c *memConn) LocalAddr() net.Addr              { return memAddr{} }
func (c *memConn) RemoteAddr() net.Addr             { return memAddr{} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "mem" }

// VAliveCrashCheck hands a copy of a to aliveNode on a fresh, idle node
// (mock transport, no peers) and discards the verdict.  The point is the side
// effect 0.2.2 has on a 1..5-byte Vsn: an index-out-of-range panic that would
// kill a real node.  0.5.1 and 0.7.0 check the length; any panic a version
// does have propagates to the caller.
func VAliveCrashCheck(a *VAlive) error {
	conf := DefaultLANConfig()
	conf.Name = "vigil-conformance-receiver"
	conf.Logger = log.New(io.Discard, "", 0)
	network := &MockNetwork{}
	conf.Transport = network.NewTransport(conf.Name)
	m, err := newMemberlist(conf)
	if err != nil {
		return err
	}
	defer m.Shutdown()
	msg := *a
	m.aliveNode(&msg, nil, false)
	return nil
}

// VerifyProtocolCrashCheck runs verifyProtocol over received push/pull
// states with an empty local table and discards the verdict; on a 1..5-byte
// Vsn 0.2.2 panics there, right after readRemoteState (0.5.1 and 0.7.0 do
// not).
func (h *VHarness) VerifyProtocolCrashCheck(states []VPushNodeState) {
	h.m.verifyProtocol(states)
}
