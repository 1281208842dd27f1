// Command vigil-conformance runs hashicorp/memberlist's own wire code (0.2.2,
// 0.5.1 or 0.7.0, whichever it was built against) for vigil's conformance
// tests.  See conformance/README.md.
//
//	vigil-conformance vectors [-baseline F] deterministic test vectors (JSON) on stdout
//	vigil-conformance decode             JSON cases on stdin -> JSON verdicts on stdout
//	vigil-conformance bench [-benchtime] Go encode/decode timings, JSON lines
package main

import (
	"fmt"
	"os"
)

const usage = `usage: vigil-conformance <command>

commands:
  vectors [-baseline FILE]
                       write deterministic test vectors as JSON to stdout
                       (with -baseline, only those that differ from FILE's)
  decode               read JSON cases (one per line) on stdin, print what Go decoded
  bench [-benchtime d] time memberlist's encode/decode, JSON lines on stdout
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "vectors":
		vectorsMain(os.Args[2:])
	case "decode":
		decodeMain()
	case "bench":
		benchMain(os.Args[2:])
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
}
