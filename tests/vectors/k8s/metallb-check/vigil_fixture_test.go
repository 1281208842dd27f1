// vigil test code (not MetalLB's): runs MetalLB's own speaker election, ShouldAnnounce in
// MetalLB's `package main`, over every step file of tests/vectors/k8s and prints, per Service,
// the nodes that announce it with their interfaces. It must be compiled as a test file of
// MetalLB's speaker package, so it is dropped into a temporary copy of go.universe.tf/metallb
// v0.16.2 taken from the Go module cache (see README.md); nothing of MetalLB's is kept here.
package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-kit/log"
	metallbv1beta1 "go.universe.tf/metallb/api/v1beta1"
	"go.universe.tf/metallb/internal/config"
	"go.universe.tf/metallb/internal/speakerlist"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"sigs.k8s.io/yaml"
)

type fakeList struct{ nodes map[string]bool }

func (f fakeList) UsableSpeakers() speakerlist.SpeakerListInfo {
	return speakerlist.SpeakerListInfo{Nodes: f.nodes}
}
func (f fakeList) Rejoin() {}

func TestVigilFixtures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(os.Getenv("VIGIL_K8S_VECTORS"), "*", "objects*.yaml"))
	sort.Strings(files)
	for _, f := range files {
		data, _ := os.ReadFile(f)
		var res config.ClusterResources
		var svcs []v1.Service
		var slices []discovery.EndpointSlice
		var fx struct {
			Members         []string
			LbClass         string
			IgnoreExcludeLb bool
		}
		nodes := map[string]*v1.Node{}
		for _, doc := range bytes.Split(data, []byte("\n---")) {
			var head struct{ Kind string }
			yaml.Unmarshal(doc, &head)
			switch head.Kind {
			case "IPAddressPool":
				var p metallbv1beta1.IPAddressPool
				yaml.Unmarshal(doc, &p)
				res.Pools = append(res.Pools, p)
			case "L2Advertisement":
				var a metallbv1beta1.L2Advertisement
				yaml.Unmarshal(doc, &a)
				res.L2Advs = append(res.L2Advs, a)
			case "Node":
				var n v1.Node
				yaml.Unmarshal(doc, &n)
				res.Nodes = append(res.Nodes, n)
				nodes[n.Name] = &n
			case "Service":
				var s v1.Service
				yaml.Unmarshal(doc, &s)
				svcs = append(svcs, s)
			case "EndpointSlice":
				var s discovery.EndpointSlice
				yaml.Unmarshal(doc, &s)
				slices = append(slices, s)
			case "Fixture":
				yaml.Unmarshal(doc, &fx)
			}
		}
		sort.Slice(res.Pools, func(i, j int) bool { return res.Pools[i].Name < res.Pools[j].Name })
		sort.Slice(res.L2Advs, func(i, j int) bool { return res.L2Advs[i].Name < res.L2Advs[j].Name })
		cfg, err := config.For(res, config.ValidationFor("native"), config.ForOptions{})
		name := strings.TrimPrefix(f, os.Getenv("VIGIL_K8S_VECTORS")+"/")
		if err != nil {
			fmt.Printf("%s: invalid\n", name)
			continue
		}
		members := map[string]bool{}
		if fx.Members == nil {
			for n := range nodes {
				members[n] = true
			}
		} else {
			for _, m := range fx.Members {
				members[m] = true
			}
		}
		for _, svc := range svcs {
			id := svc.Namespace + "/" + svc.Name
			if (svc.Spec.LoadBalancerClass == nil && fx.LbClass != "") || (svc.Spec.LoadBalancerClass != nil && *svc.Spec.LoadBalancerClass != fx.LbClass) {
				fmt.Printf("%s %s: filtered by class\n", name, id)
				continue
			}
			if svc.Spec.Type != "LoadBalancer" || len(svc.Status.LoadBalancer.Ingress) == 0 {
				fmt.Printf("%s %s: not LB / no ingress\n", name, id)
				continue
			}
			var ips []net.IP
			bad := false
			for _, in := range svc.Status.LoadBalancer.Ingress {
				ip := net.ParseIP(in.IP)
				if ip == nil {
					bad = true
				}
				ips = append(ips, ip)
			}
			if bad {
				fmt.Printf("%s %s: invalidIP\n", name, id)
				continue
			}
			pn := poolFor(cfg.Pools, ips)
			if pn == "" {
				fmt.Printf("%s %s: ipNotAllowed\n", name, id)
				continue
			}
			var eps []discovery.EndpointSlice
			for _, s := range slices {
				if s.Namespace == svc.Namespace && s.Labels["kubernetes.io/service-name"] == svc.Name {
					eps = append(eps, s)
				}
			}
			var winners []string
			reasons := map[string]bool{}
			for node := range nodes {
				c := &layer2Controller{myNode: node, ignoreExcludeLB: fx.IgnoreExcludeLb, sList: fakeList{members}}
				r := c.ShouldAnnounce(log.NewNopLogger(), id, ips, cfg.Pools.ByName[pn], &svc, eps, nodes)
				if r == "" && members[node] {
					ad := ipAdvertisementFor(ips[0], l2AdsForNode(l2AdsForService(cfg.Pools.ByName[pn].L2Advertisements, &svc), node))
					ifs := "all"
					if !ad.IsAllInterfaces() {
						l := ad.GetInterfaces().UnsortedList()
						sort.Strings(l)
						ifs = fmt.Sprint(l)
					}
					winners = append(winners, node+" "+ifs)
				} else {
					reasons[r] = true
				}
			}
			sort.Strings(winners)
			var rs []string
			for r := range reasons {
				rs = append(rs, r)
			}
			sort.Strings(rs)
			fmt.Printf("%s %s: announcers %v others %v\n", name, id, winners, rs)
		}
	}
}
