// This file is not part of hashicorp/memberlist: what vigil's Go programs need
// to know about the memberlist version they were built against (0.5.1 or
// 0.7.0 in module mode; memberlist-export/0.2.2/ has the other variant).

package memberlist

import "runtime/debug"

// VVersion is this memberlist's release, from the module information of the
// binary (the build module requires the release and replaces it with a copy
// of the same sources).
var VVersion = moduleVersion("github.com/hashicorp/memberlist")

// VMsgpack names the msgpack codec this memberlist encodes with.
var VMsgpack = "github.com/hashicorp/go-msgpack/v2 " + moduleVersion("github.com/hashicorp/go-msgpack/v2")

// VShortVsnPanics: whether a 1..5-byte Vsn makes this version index past its
// end.  0.5.1 still does (aliveNode's "update protocol versions" step checks
// len > 0, verifyProtocol checks nothing); 0.7.0 checks len >= 6 there.
var VShortVsnPanics = map[string]bool{"0.5.1": true, "0.7.0": false}[VVersion]

// VHasLabels: labels exist (since v0.3.0).
const VHasLabels = true

// VSetLabel sets Config.Label.
func VSetLabel(conf *Config, label string) error {
	conf.Label = label
	return nil
}

func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range info.Deps {
		if d.Path == path {
			if len(d.Version) > 1 && d.Version[0] == 'v' {
				return d.Version[1:]
			}
			return d.Version
		}
	}
	return "unknown"
}
