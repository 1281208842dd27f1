// Command vigil-gopeer is a real hashicorp/memberlist node (Debian's 0.2.2,
// or 0.5.1 / 0.7.0 from the module proxy) for vigil's mixed-cluster tests: it joins, gossips and fails exactly as a
// Go application would, reports what memberlist tells it as JSON lines on
// stdout, and takes simple commands on stdin.
//
// Output, one JSON object per line, each with "ts" (RFC 3339) and "event":
//
//	ready    {name, addr, port, version}        once memberlist is up
//	joined   {n} or {error}                     after the -seeds join
//	join     {node, addr, port, meta}           NotifyJoin
//	update   {node, addr, port, meta}           NotifyUpdate
//	dead     {node, ...} / left {node, ...}     NotifyLeave, by the node's state
//	user     {msg}                              NotifyMsg (a user message)
//	suspect  {node, line}                       this node's probe of NODE failed
//	rejected {kind, line}                       a packet or stream memberlist refused
//	members  {members: [{node, addr, port, state, meta}]}
//	ok       {cmd} / error {cmd, error}         the outcome of a command
//
// Commands, one per line (keys in base64):
//
//	members | health | leave MS | meta TEXT | broadcast TEXT
//	send NODE TEXT (TCP) | sendudp NODE TEXT | join ADDR...
//	key-install KEY | key-use KEY | key-remove KEY | keys | shutdown
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// out serialises JSON lines from memberlist's goroutines and ours.
type out struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func (o *out) emit(event string, fields map[string]interface{}) {
	if fields == nil {
		fields = map[string]interface{}{}
	}
	fields["ts"] = time.Now().UTC().Format(time.RFC3339Nano)
	fields["event"] = event
	line, err := json.Marshal(fields)
	if err != nil {
		line = []byte(fmt.Sprintf(`{"event":"error","error":%q}`, err.Error()))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.w.Write(line)
	o.w.WriteByte('\n')
	o.w.Flush()
}

// logSink receives memberlist's log lines: all go to stderr, and refusals of
// foreign input also become "rejected" events.
type logSink struct {
	o *out
}

var rejectKinds = []struct{ needle, kind string }{
	{"Decrypt packet failed", "decrypt"},
	{"with unacceptable label", "label"},
	{"msg type (244) not supported", "label"},
	{"not supported", "unknown_type"},
	{"Failed to receive", "stream"},
	{"invalid msgType", "stream"},
	{"Failed to read remote state", "stream"},
	{"invalid checksum", "crc"},
	{"Failed to decode", "malformed"},
}

func (s logSink) Write(p []byte) (int, error) {
	os.Stderr.Write(p)
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		// memberlist reports its own suspicions only in its log.
		if i := strings.Index(line, "memberlist: Suspect "); i >= 0 {
			rest := line[i+len("memberlist: Suspect "):]
			if j := strings.Index(rest, " has failed"); j >= 0 {
				s.o.emit("suspect", map[string]interface{}{"node": rest[:j], "line": line})
			}
		}
		lower := strings.ToLower(line)
		for _, k := range rejectKinds {
			if strings.Contains(lower, strings.ToLower(k.needle)) {
				s.o.emit("rejected", map[string]interface{}{"kind": k.kind, "line": line})
				break
			}
		}
	}
	return len(p), nil
}

// peer is the memberlist delegate and event delegate.
type peer struct {
	o     *out
	mu    sync.Mutex
	meta  []byte
	queue *memberlist.TransmitLimitedQueue
	ml    *memberlist.Memberlist // set once Create returns
}

func nodeFields(n *memberlist.Node) map[string]interface{} {
	return map[string]interface{}{
		"node": n.Name,
		"addr": n.Addr.String(),
		"port": n.Port,
		"meta": string(n.Meta),
	}
}

func (p *peer) NodeMeta(limit int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.meta) > limit {
		return p.meta[:limit]
	}
	return append([]byte(nil), p.meta...)
}

func (p *peer) NotifyMsg(msg []byte) {
	p.o.emit("user", map[string]interface{}{"msg": string(msg)})
}

func (p *peer) GetBroadcasts(overhead, limit int) [][]byte {
	return p.queue.GetBroadcasts(overhead, limit)
}

func (p *peer) LocalState(join bool) []byte            { return nil }
func (p *peer) MergeRemoteState(buf []byte, join bool) {}

func (p *peer) NotifyJoin(n *memberlist.Node)   { p.o.emit("join", nodeFields(n)) }
func (p *peer) NotifyUpdate(n *memberlist.Node) { p.o.emit("update", nodeFields(n)) }

// NotifyLeave runs with memberlist's node lock held, and 0.2.2 does not say
// whether the node died or left (n.State is never updated), so the state is
// read from the node table once the lock is released.
func (p *peer) NotifyLeave(n *memberlist.Node) {
	fields := nodeFields(n)
	p.mu.Lock()
	ml := p.ml
	p.mu.Unlock()
	if ml == nil {
		p.o.emit("dead", fields)
		return
	}
	go func() {
		if st, _ := ml.VNodeState(n.Name); st == memberlist.StateLeft {
			p.o.emit("left", fields)
		} else {
			p.o.emit("dead", fields)
		}
	}()
}

// userBroadcast is an application broadcast that nothing invalidates.
type userBroadcast []byte

func (b userBroadcast) Invalidates(memberlist.Broadcast) bool { return false }
func (b userBroadcast) Message() []byte                       { return b }
func (b userBroadcast) Finished()                             {}

func profile(name string) (*memberlist.Config, error) {
	switch name {
	case "lan":
		return memberlist.DefaultLANConfig(), nil
	case "local":
		return memberlist.DefaultLocalConfig(), nil
	case "wan":
		return memberlist.DefaultWANConfig(), nil
	}
	return nil, fmt.Errorf("unknown profile %q (lan, local, wan)", name)
}

func decodeKeys(list string) ([][]byte, error) {
	var keys [][]byte
	for _, k := range strings.Split(list, ",") {
		if k == "" {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			return nil, fmt.Errorf("key %q: %v", k, err)
		}
		keys = append(keys, b)
	}
	return keys, nil
}

func main() {
	name := flag.String("name", "", "node name (required)")
	bind := flag.String("bind", "127.0.0.1", "bind address")
	advertise := flag.String("advertise", "", "advertise address (default: the bind address)")
	port := flag.Int("port", 0, "bind port (0 picks one)")
	seeds := flag.String("seeds", "", "comma-separated host:port seeds to join")
	keys := flag.String("key", "", "comma-separated base64 keys, primary first")
	prof := flag.String("profile", "lan", "memberlist defaults: lan, local or wan")
	meta := flag.String("meta", "", "initial node metadata")
	label := flag.String("label", "", "memberlist label (0.3.0 and later; an error on 0.2.2)")
	flag.Parse()

	o := &out{w: bufio.NewWriter(os.Stdout)}
	fail := func(format string, args ...interface{}) {
		o.emit("fatal", map[string]interface{}{"error": fmt.Sprintf(format, args...)})
		os.Exit(1)
	}
	if *name == "" {
		fail("-name is required")
	}
	conf, err := profile(*prof)
	if err != nil {
		fail("%v", err)
	}
	p := &peer{o: o, meta: []byte(*meta)}
	var ml *memberlist.Memberlist
	p.queue = &memberlist.TransmitLimitedQueue{
		NumNodes:       func() int { return ml.NumMembers() },
		RetransmitMult: conf.RetransmitMult,
	}
	conf.Name = *name
	conf.BindAddr = *bind
	conf.BindPort = *port
	conf.AdvertiseAddr = *bind
	if *advertise != "" {
		conf.AdvertiseAddr = *advertise
	}
	conf.AdvertisePort = *port
	conf.Delegate = p
	conf.Events = p
	conf.Logger = log.New(logSink{o}, "", log.LstdFlags|log.Lmicroseconds)
	if err := memberlist.VSetLabel(conf, *label); err != nil {
		fail("-label: %v", err)
	}
	ring, err := decodeKeys(*keys)
	if err != nil {
		fail("%v", err)
	}
	if len(ring) > 0 {
		conf.Keyring, err = memberlist.NewKeyring(ring, ring[0])
		if err != nil {
			fail("keyring: %v", err)
		}
	}
	ml, err = memberlist.Create(conf)
	if err != nil {
		fail("create: %v", err)
	}
	p.mu.Lock()
	p.ml = ml
	p.mu.Unlock()
	local := ml.LocalNode()
	o.emit("ready", map[string]interface{}{"name": local.Name, "addr": local.Addr.String(), "port": local.Port,
		"version": memberlist.VVersion})
	if *seeds != "" {
		join(o, ml, strings.Split(*seeds, ","))
	}

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		cmd, arg := line, ""
		if i := strings.IndexByte(line, ' '); i >= 0 {
			cmd, arg = line[:i], line[i+1:]
		}
		if err := run(o, p, ml, conf, cmd, arg); err != nil {
			o.emit("error", map[string]interface{}{"cmd": cmd, "error": err.Error()})
		} else {
			o.emit("ok", map[string]interface{}{"cmd": cmd})
		}
		if cmd == "shutdown" {
			os.Exit(0)
		}
	}
	// Stdin closed: the test harness is gone, so go quietly.
	ml.Shutdown()
}

func join(o *out, ml *memberlist.Memberlist, seeds []string) {
	n, err := ml.Join(seeds)
	if err != nil {
		o.emit("joined", map[string]interface{}{"n": n, "error": err.Error()})
		return
	}
	o.emit("joined", map[string]interface{}{"n": n})
}

func findNode(ml *memberlist.Memberlist, name string) (*memberlist.Node, error) {
	for _, n := range ml.Members() {
		if n.Name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no member named %q", name)
}

func stateName(s memberlist.NodeStateType) string {
	switch s {
	case memberlist.StateAlive:
		return "alive"
	case memberlist.StateSuspect:
		return "suspect"
	case memberlist.StateDead:
		return "dead"
	case memberlist.StateLeft:
		return "left"
	}
	return strconv.Itoa(int(s))
}

func run(o *out, p *peer, ml *memberlist.Memberlist, conf *memberlist.Config, cmd, arg string) error {
	oneKey := func() ([]byte, error) {
		return base64.StdEncoding.DecodeString(strings.TrimSpace(arg))
	}
	switch cmd {
	case "members":
		// Every node in the table, dead and left ones included.
		list := []map[string]interface{}{}
		for _, n := range ml.VNodes() {
			f := nodeFields(&n.Node)
			f["state"] = stateName(n.State)
			f["incarnation"] = n.Incarnation
			list = append(list, f)
		}
		o.emit("members", map[string]interface{}{"members": list})
	case "health":
		o.emit("health", map[string]interface{}{"score": ml.GetHealthScore()})
	case "leave":
		ms, err := strconv.Atoi(arg)
		if err != nil {
			return fmt.Errorf("leave wants milliseconds: %v", err)
		}
		return ml.Leave(time.Duration(ms) * time.Millisecond)
	case "meta":
		p.mu.Lock()
		p.meta = []byte(arg)
		p.mu.Unlock()
		return ml.UpdateNode(5 * time.Second)
	case "broadcast":
		p.queue.QueueBroadcast(userBroadcast(arg))
	case "send", "sendudp":
		parts := strings.SplitN(arg, " ", 2)
		if len(parts) != 2 {
			return fmt.Errorf("%s wants NODE TEXT", cmd)
		}
		n, err := findNode(ml, parts[0])
		if err != nil {
			return err
		}
		if cmd == "send" {
			return ml.SendReliable(n, []byte(parts[1]))
		}
		return ml.SendBestEffort(n, []byte(parts[1]))
	case "join":
		join(o, ml, strings.Fields(arg))
	case "key-install", "key-use", "key-remove":
		if conf.Keyring == nil {
			return fmt.Errorf("started without encryption")
		}
		k, err := oneKey()
		if err != nil {
			return err
		}
		switch cmd {
		case "key-install":
			return conf.Keyring.AddKey(k)
		case "key-use":
			return conf.Keyring.UseKey(k)
		default:
			return conf.Keyring.RemoveKey(k)
		}
	case "keys":
		var list []string
		if conf.Keyring != nil {
			for _, k := range conf.Keyring.GetKeys() {
				list = append(list, base64.StdEncoding.EncodeToString(k))
			}
		}
		o.emit("keys", map[string]interface{}{"keys": list})
	case "shutdown":
		return ml.Shutdown()
	default:
		return fmt.Errorf("unknown command %q", cmd)
	}
	return nil
}
