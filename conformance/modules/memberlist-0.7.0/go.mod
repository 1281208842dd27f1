// vigil's build module for the Go test programs against memberlist 0.7.0; conformance/build.sh
// copies it to .build/modules/memberlist-0.7.0/, next to a copy of the release's sources (in
// ./memberlist, with vigil's export files added) and our commands.
module vigil/conformance

go 1.25.0

require github.com/hashicorp/memberlist v0.7.0

require (
	github.com/google/btree v1.1.3 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-immutable-radix v1.3.1 // indirect
	github.com/hashicorp/go-metrics v0.7.0 // indirect
	github.com/hashicorp/go-msgpack/v2 v2.1.5 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/hashicorp/go-sockaddr v1.0.7 // indirect
	github.com/hashicorp/golang-lru v1.0.2 // indirect
	github.com/miekg/dns v1.1.73 // indirect
	github.com/sean-/seed v0.0.0-20170313163322-e2103e2c3529 // indirect
	golang.org/x/net v0.57.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)

replace github.com/hashicorp/memberlist => ./memberlist
