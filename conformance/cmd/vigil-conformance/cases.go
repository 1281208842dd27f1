package main

// The vector catalogue: which messages and framings are written, with the
// edge values the Rust codec has to get byte-exact.

import (
	"fmt"
	"math"
	"net"

	"github.com/hashicorp/memberlist"
)

var (
	ipv4       = []byte{10, 0, 0, 1}
	ipv4Mapped = []byte(net.ParseIP("10.0.0.1")) // 16 bytes, ::ffff:10.0.0.1
	ipv6       = []byte(net.ParseIP("2001:db8::1"))
	localhost  = []byte{127, 0, 0, 1}
	stdVsn     = []byte{1, 5, 2, 0, 0, 0}

	u32Edges   = []uint32{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32 - 1, math.MaxUint32}
	portEdges  = []uint16{0, 1, 127, 128, 7946, 65535}
	strLens    = []int{0, 31, 32, 255, 256}
	bigStrLens = []int{65535, 65536, 70000}

	key16 = seqBytes(0, 16) // 00..0f, the key of memberlist's own tests
	key24 = seqBytes(0, 24)
	key32 = seqBytes(0, 32)

	docNonce = seqBytes(0, 12) // 000102..0b, research note §9.2
	docPlain = []byte("this is a plain text message")
)

// seqBytes returns start, start+1, ... (mod 256), n bytes.
func seqBytes(start, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(start + i)
	}
	return b
}

// asciiString is a deterministic printable string of exactly n bytes; the
// first bytes spell the salt so long strings stay tellable apart.
func asciiString(salt string, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-."
	b := make([]byte, n)
	for i := range b {
		if i < len(salt) {
			b[i] = salt[i]
		} else {
			b[i] = alphabet[i%len(alphabet)]
		}
	}
	return string(b)
}

// pseudoRandom gives n reproducible bytes (same generator as the nonces).
func pseudoRandom(seed string, n int) []byte {
	r := &detReader{seed: []byte("vigil-conformance-data/" + seed)}
	b := make([]byte, n)
	r.Read(b)
	return b
}

func repeatedText(n int) []byte {
	const text = "memberlist gossip over UDP, push/pull over TCP; vigil speaks it too. "
	b := make([]byte, n)
	for i := range b {
		b[i] = text[i%len(text)]
	}
	return b
}

func docPing() *memberlist.VPing {
	return &memberlist.VPing{SeqNo: 1, Node: "node-b", SourceAddr: localhost, SourcePort: 7946, SourceNode: "node-a"}
}

func docSuspect() *memberlist.VSuspect {
	return &memberlist.VSuspect{Incarnation: 5, Node: "node-b", From: "node-a"}
}

func docAlive() *memberlist.VAlive {
	return &memberlist.VAlive{Incarnation: 1, Node: "node-a", Addr: localhost, Port: 7946, Vsn: stdVsn}
}

// aliveN is the i-th member of a cluster, for compounds and push/pulls.
func aliveN(i int) *memberlist.VAlive {
	return &memberlist.VAlive{Incarnation: uint32(i + 1), Node: fmt.Sprintf("node-%03d", i),
		Addr: []byte{10, 0, byte(i >> 8), byte(i)}, Port: 7946, Vsn: stdVsn}
}

func aliveValues(n int) []interface{} {
	out := make([]interface{}, n)
	for i := range out {
		out[i] = aliveN(i)
	}
	return out
}

func stateN(i int) memberlist.VPushNodeState {
	return memberlist.VPushNodeState{Name: fmt.Sprintf("node-%03d", i),
		Addr: []byte{10, 0, byte(i >> 8), byte(i)}, Port: 7946, Incarnation: uint32(i + 1),
		State: memberlist.NodeStateType(i % 4), Vsn: stdVsn}
}

func statesN(n int) []memberlist.VPushNodeState {
	out := make([]memberlist.VPushNodeState, n)
	for i := range out {
		out[i] = stateN(i)
	}
	return out
}

// threeStates mixes address forms, meta and every state value but one.
func threeStates() []memberlist.VPushNodeState {
	return []memberlist.VPushNodeState{
		{Name: "node-a", Addr: ipv4, Port: 7946, Meta: []byte("role=lb"), Incarnation: 1,
			State: memberlist.StateAlive, Vsn: stdVsn},
		{Name: "node-b", Addr: ipv4Mapped, Port: 7947, Meta: nil, Incarnation: 7,
			State: memberlist.StateSuspect, Vsn: []byte{1, 5, 2, 2, 5, 4}},
		{Name: "node-c", Addr: ipv6, Port: 65535, Meta: []byte{}, Incarnation: 300,
			State: memberlist.StateDead, Vsn: []byte{1, 5, 3, 0, 0, 0}},
	}
}

func addAll(g *generator) {
	addPings(g)
	addIndirectPings(g)
	addAcks(g)
	addGossip(g)
	addErrs(g)
	addPushPulls(g)
	addUsers(g)
	addCompounds(g)
	addCompression(g)
	addCRC(g)
	addEncryption(g)
	addPackets(g)
	addStreams(g)
}

func addPings(g *generator) {
	g.message("ping/doc-seq-100", &memberlist.VPing{SeqNo: 100})
	g.message("ping/doc-source", docPing())
	for _, s := range u32Edges {
		g.message(fmt.Sprintf("ping/seq-%d", s), &memberlist.VPing{SeqNo: s, Node: "node-b"})
	}
	sources := []struct {
		name string
		addr []byte
	}{{"ipv4", ipv4}, {"ipv4-mapped", ipv4Mapped}, {"ipv6", ipv6}}
	for _, s := range sources {
		g.message("ping/source-"+s.name, &memberlist.VPing{SeqNo: 7, Node: "node-b",
			SourceAddr: s.addr, SourcePort: 7946, SourceNode: "node-a"})
	}
	for _, p := range portEdges {
		// Port 0 is omitempty: the field disappears from the map.
		g.message(fmt.Sprintf("ping/source-port-%d", p), &memberlist.VPing{SeqNo: 7, Node: "node-b",
			SourceAddr: ipv4, SourcePort: p, SourceNode: "node-a"})
	}
	g.message("ping/source-absent", &memberlist.VPing{SeqNo: 7, Node: "node-b"})
	g.message("ping/source-addr-empty", &memberlist.VPing{SeqNo: 7, Node: "node-b",
		SourceAddr: []byte{}, SourcePort: 7946, SourceNode: "node-a"})
	g.message("ping/source-node-only", &memberlist.VPing{SeqNo: 7, SourceNode: "node-a"})
	for _, n := range strLens {
		g.message(fmt.Sprintf("ping/node-len-%d", n), &memberlist.VPing{SeqNo: 9, Node: asciiString("target", n)})
		g.message(fmt.Sprintf("ping/source-node-len-%d", n), &memberlist.VPing{SeqNo: 9, Node: "node-b",
			SourceAddr: ipv4, SourcePort: 7946, SourceNode: asciiString("source", n)})
	}
}

func addIndirectPings(g *generator) {
	g.message("indirect_ping/doc", &memberlist.VIndirectPingReq{SeqNo: 2, Target: []byte{10, 0, 0, 2},
		Port: 7946, Node: "node-c", Nack: true, SourceAddr: localhost, SourcePort: 7946, SourceNode: "node-a"})
	for _, nack := range []bool{false, true} {
		g.message(fmt.Sprintf("indirect_ping/nack-%v", nack), &memberlist.VIndirectPingReq{SeqNo: 3,
			Target: ipv4, Port: 7946, Node: "node-c", Nack: nack})
	}
	targets := []struct {
		name string
		addr []byte
	}{{"ipv4", ipv4}, {"ipv4-mapped", ipv4Mapped}, {"ipv6", ipv6}, {"nil", nil}, {"empty", []byte{}}}
	for _, t := range targets {
		g.message("indirect_ping/target-"+t.name, &memberlist.VIndirectPingReq{SeqNo: 3,
			Target: t.addr, Port: 7946, Node: "node-c", Nack: true})
	}
	for _, p := range portEdges {
		g.message(fmt.Sprintf("indirect_ping/port-%d", p), &memberlist.VIndirectPingReq{SeqNo: 3,
			Target: ipv4, Port: p, Node: "node-c"})
	}
	for _, s := range u32Edges {
		g.message(fmt.Sprintf("indirect_ping/seq-%d", s), &memberlist.VIndirectPingReq{SeqNo: s,
			Target: ipv4, Port: 7946, Node: "node-c", Nack: true,
			SourceAddr: ipv4Mapped, SourcePort: 7946, SourceNode: "node-a"})
	}
	g.message("indirect_ping/source-ipv6", &memberlist.VIndirectPingReq{SeqNo: 4, Target: ipv6,
		Port: 7946, Node: "node-c", SourceAddr: ipv6, SourcePort: 65535, SourceNode: "node-a"})
	for _, n := range strLens {
		g.message(fmt.Sprintf("indirect_ping/node-len-%d", n), &memberlist.VIndirectPingReq{SeqNo: 5,
			Target: ipv4, Port: 7946, Node: asciiString("target", n)})
	}
}

func addAcks(g *generator) {
	g.message("ack/doc-payload-nil", &memberlist.VAckResp{SeqNo: 1})
	g.message("ack/doc-payload-010203", &memberlist.VAckResp{SeqNo: 1, Payload: []byte{1, 2, 3}})
	g.message("ack/payload-empty", &memberlist.VAckResp{SeqNo: 1, Payload: []byte{}})
	for _, n := range []int{31, 32, 255, 256, 65535, 65536} {
		g.message(fmt.Sprintf("ack/payload-len-%d", n), &memberlist.VAckResp{SeqNo: 2,
			Payload: pseudoRandom(fmt.Sprintf("ack-%d", n), n)})
	}
	for _, s := range u32Edges {
		g.message(fmt.Sprintf("ack/seq-%d", s), &memberlist.VAckResp{SeqNo: s})
		g.message(fmt.Sprintf("nack/seq-%d", s), &memberlist.VNackResp{SeqNo: s})
	}
	g.message("nack/doc-seq-300", &memberlist.VNackResp{SeqNo: 300})
}

// addGossip covers suspect, alive and dead.
func addGossip(g *generator) {
	g.message("suspect/doc", docSuspect())
	g.message("alive/doc", docAlive())
	g.message("alive/doc-incarnation-200-meta-m", &memberlist.VAlive{Incarnation: 200, Node: "node-a",
		Addr: localhost, Port: 7946, Meta: []byte("m"), Vsn: stdVsn})
	g.message("dead/doc-leave", &memberlist.VDead{Incarnation: 3, Node: "node-a", From: "node-a"})
	g.message("dead/accused-by-other", &memberlist.VDead{Incarnation: 3, Node: "node-b", From: "node-a"})
	for _, inc := range u32Edges {
		g.message(fmt.Sprintf("suspect/incarnation-%d", inc), &memberlist.VSuspect{Incarnation: inc, Node: "node-b", From: "node-a"})
		g.message(fmt.Sprintf("dead/incarnation-%d", inc), &memberlist.VDead{Incarnation: inc, Node: "node-b", From: "node-a"})
		a := docAlive()
		a.Incarnation = inc
		g.message(fmt.Sprintf("alive/incarnation-%d", inc), a)
	}
	for _, n := range strLens {
		g.message(fmt.Sprintf("suspect/node-len-%d", n), &memberlist.VSuspect{Incarnation: 1, Node: asciiString("accused", n), From: "node-a"})
		g.message(fmt.Sprintf("suspect/from-len-%d", n), &memberlist.VSuspect{Incarnation: 1, Node: "node-b", From: asciiString("accuser", n)})
		g.message(fmt.Sprintf("dead/node-len-%d", n), &memberlist.VDead{Incarnation: 1, Node: asciiString("dead", n), From: "node-a"})
		g.message(fmt.Sprintf("dead/from-len-%d", n), &memberlist.VDead{Incarnation: 1, Node: "node-b", From: asciiString("accuser", n)})
	}
	for _, n := range append(append([]int{}, strLens...), bigStrLens...) {
		a := docAlive()
		a.Node = asciiString("alive", n)
		g.message(fmt.Sprintf("alive/node-len-%d", n), a)
	}
	addrs := []struct {
		name string
		addr []byte
	}{{"ipv4", ipv4}, {"ipv4-mapped", ipv4Mapped}, {"ipv6", ipv6}, {"nil", nil}, {"empty", []byte{}}}
	for _, ad := range addrs {
		a := docAlive()
		a.Addr = ad.addr
		g.message("alive/addr-"+ad.name, a)
	}
	for _, p := range portEdges {
		a := docAlive()
		a.Port = p
		g.message(fmt.Sprintf("alive/port-%d", p), a)
	}
	metas := []struct {
		name string
		meta []byte
	}{{"nil", nil}, {"empty", []byte{}}, {"len-1", []byte("m")}, {"len-31", pseudoRandom("meta31", 31)},
		{"len-32", pseudoRandom("meta32", 32)}, {"len-255", pseudoRandom("meta255", 255)},
		{"len-256", pseudoRandom("meta256", 256)}, {"len-512", pseudoRandom("meta512", memberlist.MetaMaxSize)}}
	for _, m := range metas {
		a := docAlive()
		a.Meta = m.meta
		g.message("alive/meta-"+m.name, a)
	}
	vsns := []struct {
		name string
		vsn  []byte
	}{{"nil", nil}, {"empty", []byte{}}, {"short-3", []byte{1, 5, 2}}, {"serf", []byte{1, 5, 2, 2, 5, 4}},
		{"protocol-5", []byte{1, 5, 5, 0, 0, 0}}}
	for _, v := range vsns {
		a := docAlive()
		a.Vsn = v.vsn
		g.message("alive/vsn-"+v.name, a)
	}
}

func addErrs(g *generator) {
	g.message("err/doc-boom", &memberlist.VErrResp{Error: "boom"})
	for _, n := range append(append([]int{}, strLens...), bigStrLens...) {
		g.message(fmt.Sprintf("err/len-%d", n), &memberlist.VErrResp{Error: asciiString("error", n)})
	}
}

func pushPull(join bool, states []memberlist.VPushNodeState, user []byte) *PushPull {
	if len(user) == 0 {
		user = nil // Go reads a zero-length user state back as nil
	}
	return &PushPull{Join: join, Nodes: len(states), UserLen: len(user), States: states, UserState: user}
}

func addPushPulls(g *generator) {
	docState := memberlist.VPushNodeState{Name: "node-a", Addr: localhost, Port: 7946, Incarnation: 1,
		State: memberlist.StateAlive, Vsn: stdVsn}
	g.message("push_pull/doc-1-state-join", pushPull(true, []memberlist.VPushNodeState{docState}, nil))
	g.message("push_pull/0-states-join", pushPull(true, nil, nil))
	g.message("push_pull/0-states-anti-entropy", pushPull(false, nil, nil))
	g.message("push_pull/0-states-user-state", pushPull(false, nil, []byte("user-state")))
	g.message("push_pull/1-state-user-state", pushPull(true, statesN(1), []byte("hello")))
	g.message("push_pull/3-states", pushPull(false, threeStates(), nil))
	g.message("push_pull/3-states-join-user-state", pushPull(true, threeStates(), pseudoRandom("us3", 64)))
	left := threeStates()
	left[2].State = memberlist.StateLeft
	g.message("push_pull/3-states-left", pushPull(false, left, nil))
	// 200 states and 300 bytes of user state: the doc's header vector,
	// with Nodes and UserStateLen above 127 (0.5.x writes cc c8 / cd 01 2c).
	g.message("push_pull/200-states-user-300", pushPull(false, statesN(200), pseudoRandom("us300", 300)))
	g.message("push_pull/200-states-join", pushPull(true, statesN(200), nil))
	for _, n := range []int{127, 128, 255, 256, 65536} {
		g.message(fmt.Sprintf("push_pull/user-state-len-%d", n), pushPull(false, statesN(1), repeatedText(n)))
	}
	edges := make([]memberlist.VPushNodeState, len(u32Edges))
	for i, inc := range u32Edges {
		edges[i] = stateN(i)
		edges[i].Incarnation = inc
		edges[i].Port = portEdges[i%len(portEdges)]
	}
	g.message("push_pull/incarnation-and-port-edges", pushPull(false, edges, nil))
	names := make([]memberlist.VPushNodeState, len(strLens))
	for i, n := range strLens {
		names[i] = stateN(i)
		names[i].Name = asciiString("state", n)
		names[i].Meta = pseudoRandom(fmt.Sprintf("state-meta-%d", n), n)
	}
	g.message("push_pull/name-and-meta-lengths", pushPull(false, names, nil))
}

func addUsers(g *generator) {
	g.message("user/empty", &UDPUser{Msg: []byte{}})
	g.message("user/hello", &UDPUser{Msg: []byte("hello")})
	g.message("user/all-bytes", &UDPUser{Msg: seqBytes(0, 256)})
	for _, n := range []int{0, 5, 127, 128, 200, 300, 65536} {
		var msg []byte
		if n > 0 {
			msg = repeatedText(n)
		}
		g.message(fmt.Sprintf("user_stream/len-%d", n), &UserStream{UserMsgLen: n, Msg: msg})
	}
}

func addCompounds(g *generator) {
	g.compound("compound/doc-ping-suspect", []interface{}{docPing(), docSuspect()})
	for _, n := range []int{1, 2, 10, 127, 128, 255} {
		g.compound(fmt.Sprintf("compound/alive-%d", n), aliveValues(n))
	}
	g.compound("compound/mixed", []interface{}{docPing(), &memberlist.VAckResp{SeqNo: 1},
		&UDPUser{Msg: []byte("hello")}, docAlive(), &memberlist.VNackResp{SeqNo: 300}})
}

func addCompression(g *generator) {
	inputs := []struct {
		name string
		data []byte
	}{
		{"empty", []byte{}},
		{"testing", []byte("testing")},
		{"all-bytes", seqBytes(0, 256)},
		{"zeros-5000", make([]byte, 5000)},
		{"random-20000", pseudoRandom("lzw20000", 20000)}, // overflows the 4096-code table
		{"text-70000", repeatedText(70000)},
	}
	for _, in := range inputs {
		g.lzw("lzw/"+in.name, in.data)
	}
	g.compressed("compress/doc-testing", []byte("testing"))
	g.compressed("compress/empty", []byte{})
	g.compressed("compress/ping", mustEncode(g, "compress/ping", &memberlist.VPing{SeqNo: 100}))
	g.compressed("compress/compound-alive-10", memberlist.VMakeCompound(encodeAll(g, aliveValues(10))))
	g.compressed("compress/random-20000", pseudoRandom("lzw20000", 20000))
}

func encodeAll(g *generator, values []interface{}) [][]byte {
	out := make([][]byte, len(values))
	for i, v := range values {
		out[i] = mustEncode(g, "encodeAll", v)
	}
	return out
}

func addCRC(g *generator) {
	g.crc("crc/doc-ping", mustEncode(g, "crc", docPing()))
	g.crc("crc/empty", []byte{})
	g.crc("crc/03030303", []byte{3, 3, 3, 3})
	g.crc("crc/compound-alive-10", memberlist.VMakeCompound(encodeAll(g, aliveValues(10))))
}

func addEncryption(g *generator) {
	keys := []struct {
		name string
		key  []byte
	}{{"aes128", key16}, {"aes192", key24}, {"aes256", key32}}
	for _, vsn := range []uint8{0, 1} {
		for _, k := range keys {
			g.encrypt(fmt.Sprintf("encrypt/v%d-%s", vsn, k.name), vsn, k.key, nil, docPlain, nil)
			g.encrypt(fmt.Sprintf("encrypt/v%d-%s-aad", vsn, k.name), vsn, k.key, []byte("lbl"), docPlain, nil)
		}
		g.encrypt(fmt.Sprintf("encrypt/v%d-empty", vsn), vsn, key16, nil, []byte{}, nil)
		g.encrypt(fmt.Sprintf("encrypt/v%d-block-aligned-32", vsn), vsn, key16, nil, seqBytes(100, 32), nil)
		g.encrypt(fmt.Sprintf("encrypt/v%d-ping-stream-aad", vsn), vsn, key32,
			[]byte{10, 0, 0, 0, byte(memberlist.VEncryptedLength(vsn, 15))},
			mustEncode(g, "encrypt", &memberlist.VPing{SeqNo: 100}), nil)
	}
	// The research note's fixed-nonce known answers.
	g.encrypt("encrypt/v1-doc-nonce", 1, key16, nil, docPlain, docNonce)
	g.encrypt("encrypt/v1-doc-nonce-aad", 1, key16, []byte("lbl"), docPlain, docNonce)
	g.encrypt("encrypt/v0-doc-nonce", 0, key16, nil, docPlain, docNonce)
}

func addPackets(g *generator) {
	ping := []interface{}{docPing()}
	three := []interface{}{docPing(), docAlive(), &UDPUser{Msg: []byte("hello")}}
	ten := aliveValues(10)
	g.packet("packet/plain-ping", ping, framing{})
	g.packet("packet/plain-compound-3", three, framing{})
	g.packet("packet/compress-not-smaller-ping", ping, framing{compress: true})
	g.packet("packet/compress-compound-alive-10", ten, framing{compress: true})
	g.packet("packet/crc-ping", ping, framing{crc: true})
	g.packet("packet/crc-compress-compound-alive-10", ten, framing{compress: true, crc: true})
	keys := []struct {
		name string
		key  []byte
	}{{"aes128", key16}, {"aes192", key24}, {"aes256", key32}}
	for _, vsn := range []uint8{0, 1} {
		for _, k := range keys {
			g.packet(fmt.Sprintf("packet/encrypt-v%d-%s-ping", vsn, k.name), ping,
				framing{keys: [][]byte{k.key}, vsn: vsn})
		}
	}
	g.packet("packet/encrypt-v1-keyring-compound-3", three,
		framing{keys: [][]byte{key32, key16}, vsn: 1})
	g.packet("packet/label-ping", ping, framing{label: "vigil"})
	g.packet("packet/label-255-ping", ping, framing{label: asciiString("label", 255)})
	g.packet("packet/label-encrypt-v1-ping", ping, framing{keys: [][]byte{key16}, vsn: 1, label: "vigil"})
	g.packet("packet/label-encrypt-v0-ping", ping, framing{keys: [][]byte{key24}, vsn: 0, label: "vigil"})
	g.packet("packet/all-v1-compound-alive-10", ten,
		framing{compress: true, crc: true, keys: [][]byte{key32}, vsn: 1, label: "prod-cluster"})
	g.packet("packet/all-v0-compound-alive-10", ten,
		framing{compress: true, crc: true, keys: [][]byte{key16}, vsn: 0, label: "prod-cluster"})
	g.packet("packet/compress-crc-encrypt-v1-compound-alive-10", ten,
		framing{compress: true, crc: true, keys: [][]byte{key16}, vsn: 1})
}

func addStreams(g *generator) {
	ping := &memberlist.VPing{SeqNo: 100}
	pp := pushPull(false, threeStates(), []byte("user-state"))
	big := pushPull(true, statesN(200), pseudoRandom("us300", 300))
	g.stream("stream/ping-plain", docPing(), framing{})
	g.stream("stream/ping-compressed", docPing(), framing{compress: true})
	g.stream("stream/ping-encrypt-v1", docPing(), framing{keys: [][]byte{key16}, vsn: 1})
	g.stream("stream/ping-doc-nonce-v1", ping, framing{keys: [][]byte{key16}, vsn: 1, nonce: docNonce})
	g.stream("stream/ping-doc-nonce-v1-label", ping, framing{keys: [][]byte{key16}, vsn: 1, label: "lbl", nonce: docNonce})
	g.stream("stream/ack-plain", &memberlist.VAckResp{SeqNo: 100}, framing{})
	g.stream("stream/ack-compressed-encrypt-v1", &memberlist.VAckResp{SeqNo: 100},
		framing{compress: true, keys: [][]byte{key16}, vsn: 1})
	g.stream("stream/err-plain", &memberlist.VErrResp{Error: "boom"}, framing{})
	g.stream("stream/push_pull-plain", pp, framing{})
	g.stream("stream/push_pull-compressed", pp, framing{compress: true})
	g.stream("stream/push_pull-encrypt-v0", pp, framing{keys: [][]byte{key16}, vsn: 0})
	g.stream("stream/push_pull-encrypt-v1", pp, framing{keys: [][]byte{key16}, vsn: 1})
	g.stream("stream/push_pull-compressed-encrypt-v1-aes256", pp, framing{compress: true, keys: [][]byte{key32}, vsn: 1})
	g.stream("stream/push_pull-compressed-encrypt-v0-aes192", pp, framing{compress: true, keys: [][]byte{key24}, vsn: 0})
	g.stream("stream/push_pull-label-plain", pp, framing{label: "vigil"})
	g.stream("stream/push_pull-label-encrypt-v1", pp, framing{keys: [][]byte{key16}, vsn: 1, label: "vigil"})
	g.stream("stream/push_pull-label-compressed-encrypt-v1", pp,
		framing{compress: true, keys: [][]byte{key16, key32}, vsn: 1, label: "prod-cluster"})
	g.stream("stream/push_pull-200-compressed-encrypt-v1", big, framing{compress: true, keys: [][]byte{key32}, vsn: 1})
	g.stream("stream/push_pull-empty-join", pushPull(true, nil, nil), framing{})
	g.stream("stream/user_stream-plain", &UserStream{UserMsgLen: 5, Msg: []byte("hello")}, framing{})
	g.stream("stream/user_stream-compressed-encrypt-v1", &UserStream{UserMsgLen: 300, Msg: repeatedText(300)},
		framing{compress: true, keys: [][]byte{key16}, vsn: 1})
	g.stream("stream/user_stream-label-encrypt-v0", &UserStream{UserMsgLen: 5, Msg: []byte("hello")},
		framing{keys: [][]byte{key16}, vsn: 0, label: "vigil"})
}
