// This file is not part of hashicorp/memberlist: what vigil's Go programs need
// to know about the memberlist version they were built against (0.2.2 here;
// memberlist-export/0.5-0.7/ has the other variant).

package memberlist

import "errors"

// VVersion is this memberlist's release.  GOPATH builds carry no module
// information, so it is spelled out here.
const VVersion = "0.2.2"

// VMsgpack names the msgpack codec this memberlist encodes with.
const VMsgpack = "github.com/hashicorp/go-msgpack 0.5.x"

// VShortVsnPanics: a 1..5-byte Vsn makes aliveNode and verifyProtocol index
// past its end (no length check in 0.2.2).
const VShortVsnPanics = true

// VHasLabels: 0.2.2 has no label support (it arrived in v0.3.0).
const VHasLabels = false

// VSetLabel would set Config.Label; 0.2.2 has none, so asking for a label is
// an error.
func VSetLabel(conf *Config, label string) error {
	if label == "" {
		return nil
	}
	return errors.New("memberlist 0.2.2 has no labels (they arrived in v0.3.0)")
}
