// This file is vigil's, not frr-k8s's: conformance/build.sh adds it to a build-time copy of
// github.com/metallb/frr-k8s v0.0.21's api/ tree (never committed), together with one field in
// Advertise, because MetalLB v0.16.2 was released against frr-k8s v0.0.27, which the module
// proxy does not serve, and v0.0.27's API has these two things that v0.0.21's lacks. MetalLB
// uses them only when it runs in frr-k8s BGP mode (METALLB_BGP_TYPE=frr-k8s); vigil's tests
// run it in layer-2 mode, so nothing they do passes through this type.

package v1beta1

// AsPathPrependPrefixes is a list of prefixes that are advertised with the AS path prepended
// AsPathPrepend times (the shape MetalLB's frr-k8s writer fills in).
type AsPathPrependPrefixes struct {
	// Prefixes is the list of prefixes.
	Prefixes []string `json:"prefixes,omitempty"`
	// AsPathPrepend is how many times the AS is prepended for them.
	AsPathPrepend uint8 `json:"asPathPrepend,omitempty"`
}

// DeepCopyInto copies the receiver into out.
func (in *AsPathPrependPrefixes) DeepCopyInto(out *AsPathPrependPrefixes) {
	*out = *in
	if in.Prefixes != nil {
		out.Prefixes = append([]string(nil), in.Prefixes...)
	}
}
