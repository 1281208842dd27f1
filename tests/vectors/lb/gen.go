// Writes election.txt: Go's net.IP.String() for odd spellings, and MetalLB's L2 owner order
// (candidates sorted by SHA-256(node + "#" + ip.String()), smallest first, as speaker's
// ShouldAnnounce does) for a few VIPs. Run: go run gen.go > election.txt
package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"net"
	"sort"
	"strings"
)

var spellings = []string{
	"198.18.0.100",
	"0.0.0.0",
	"255.255.255.255",
	"::ffff:198.18.0.7",
	"::FFFF:c612:0007",
	"0:0:0:0:0:ffff:198.18.0.9",
	"::1.2.3.4",
	"::",
	"::1",
	"1::",
	"2001:DB8::100",
	"2001:0db8:0000:0000:0000:0000:0000:0100",
	"2001:db8:0:0:1:0:0:1",
	"2001:db8:0:1:0:0:0:1",
	"2001:db8::1:0:0:1",
	"2001:db8:0:0:0:0:2:1",
	"2001:db8:1:0:1:0:1:0",
	"2001:db8:a:b:c:d:e:f",
	"FE80::0001",
	"fe80:0:0:0:0:0:0:0",
	"0:0:0:0:0:0:0:1",
	"0:1:0:0:0:0:0:0",
	"1:0:0:0:0:0:0:0",
	"::ffff:0:0",
	"::fffe:1.2.3.4",
	"64:ff9b::198.18.0.1",
	"2001:db8::ffff:1.2.3.4",
	"abcd:ef01:2345:6789:ABCD:EF01:2345:6789",
	"0:0:1::",
	"ff02::1:ff00:100",
}

var nodes = []string{
	"node-a", "node-b", "node-c", "worker-1", "worker-2", "worker-10",
	"k8s-control-plane", "host.example.com", "Node-A", "\u00fcn\u00efcode",
}

var vips = []string{
	"198.18.0.100", "198.18.0.101", "2001:DB8::100", "::ffff:198.18.0.7",
	"2001:db8:0:0:1:0:0:1",
}

func main() {
	for _, s := range spellings {
		fmt.Printf("ip %s %s\n", s, net.ParseIP(s).String())
	}
	for _, v := range vips {
		ip := net.ParseIP(v)
		order := append([]string(nil), nodes...)
		key := func(n string) [32]byte { return sha256.Sum256([]byte(n + "#" + ip.String())) }
		sort.Slice(order, func(i, j int) bool {
			a, b := key(order[i]), key(order[j])
			return bytes.Compare(a[:], b[:]) < 0
		})
		fmt.Printf("order %s %s\n", v, strings.Join(order, ","))
	}
	for _, n := range []string{"node-a", "worker-10"} {
		for _, v := range vips[:3] {
			h := sha256.Sum256([]byte(n + "#" + net.ParseIP(v).String()))
			fmt.Printf("hash %s %s %x\n", n, v, h)
		}
	}
}
