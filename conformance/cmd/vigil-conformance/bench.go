package main

// The bench command: how fast Go's own memberlist 0.2.2 encodes and decodes
// a few typical packets, as a yardstick for the Rust codec.

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

type benchCase struct {
	name   string
	encode func() []byte           // produce the wire bytes
	decode func(wire []byte) error // consume them as the receive path does
}

type benchResult struct {
	Case     string  `json:"case"`
	EncodeNs float64 `json:"encode_ns"`
	DecodeNs float64 `json:"decode_ns"`
}

func mustBytes(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// encodeMsg/decodeMsg are the single-message paths: encode(), and decode()
// of the body after the type byte, as handleCommand + handler do.
func encodeMsg(t uint8, v interface{}) func() []byte {
	return func() []byte { return mustBytes(memberlist.VEncode(t, v)) }
}

func decodeMsg(newOut func() interface{}) func([]byte) error {
	return func(wire []byte) error { return memberlist.VDecode(wire[1:], newOut()) }
}

// buildCompound encodes every alive and joins them, as gossip does.
func buildCompound(alives []interface{}) []byte {
	parts := make([][]byte, len(alives))
	for i, a := range alives {
		parts[i] = mustBytes(memberlist.VEncode(memberlist.VAliveMsg, a))
	}
	return memberlist.VMakeCompound(parts)
}

// splitAndDecode is handleCompound followed by handleAlive for each part.
func splitAndDecode(wire []byte) error {
	trunc, parts, err := memberlist.VDecodeCompound(wire[1:])
	if err != nil {
		return err
	}
	if trunc != 0 {
		return fmt.Errorf("%d truncated parts", trunc)
	}
	for _, p := range parts {
		var a memberlist.VAlive
		if err := memberlist.VDecode(p[1:], &a); err != nil {
			return err
		}
	}
	return nil
}

func benchCases() []benchCase {
	ping := docPing()
	ack := &memberlist.VAckResp{SeqNo: 42}
	alive := docAlive()
	alives := aliveValues(10)
	return []benchCase{
		{"ping", encodeMsg(memberlist.VPingMsg, ping),
			decodeMsg(func() interface{} { return &memberlist.VPing{} })},
		{"ack", encodeMsg(memberlist.VAckRespMsg, ack),
			decodeMsg(func() interface{} { return &memberlist.VAckResp{} })},
		{"alive", encodeMsg(memberlist.VAliveMsg, alive),
			decodeMsg(func() interface{} { return &memberlist.VAlive{} })},
		{"compound10", func() []byte { return buildCompound(alives) }, splitAndDecode},
		{"encrypted_compound10",
			func() []byte {
				return mustBytes(memberlist.VEncrypt(1, key16, buildCompound(alives), nil))
			},
			func(wire []byte) error {
				plain, err := memberlist.VDecrypt([][]byte{key16}, wire, nil)
				if err != nil {
					return err
				}
				return splitAndDecode(plain)
			}},
	}
}

func nsPerOp(r testing.BenchmarkResult) float64 {
	if r.N == 0 {
		return 0
	}
	ns := float64(r.T.Nanoseconds()) / float64(r.N)
	return math.Round(ns*10) / 10
}

func benchMain(args []string) {
	fs := flag.NewFlagSet("bench", flag.ExitOnError)
	benchtime := fs.Duration("benchtime", 500*time.Millisecond, "target run time per measurement")
	fs.Parse(args)
	// testing.Benchmark reads its run time from the testing flags.
	testing.Init()
	flag.Set("test.benchtime", benchtime.String())

	enc := json.NewEncoder(os.Stdout)
	for _, c := range benchCases() {
		wire := c.encode()
		if err := c.decode(wire); err != nil {
			fmt.Fprintf(os.Stderr, "bench %s: decode failed: %v\n", c.name, err)
			os.Exit(1)
		}
		encode := testing.Benchmark(func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				c.encode()
			}
		})
		decode := testing.Benchmark(func(b *testing.B) {
			// The same input every time: decryptPayload's gcm.Open writes
			// into a fresh slice, so nothing here mutates wire.  (Stopping
			// the timer per op would cost more than the ops themselves.)
			for i := 0; i < b.N; i++ {
				if err := c.decode(wire); err != nil {
					b.Fatal(err)
				}
			}
		})
		enc.Encode(benchResult{c.name, nsPerOp(encode), nsPerOp(decode)})
	}
}
