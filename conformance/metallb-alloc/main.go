// Command metallb-alloc-probe runs MetalLB's own IP allocator (go.universe.tf/metallb's
// internal/allocator and internal/config, v0.16.2) over scenarios read from stdin, one JSON
// object per line, and prints one JSON line of results per scenario. vigil's
// crates/lb/tests/pool_metallb.rs runs the same scenarios through lb::pool and compares.
//
// The module path sits under go.universe.tf/metallb/ only so that Go lets it import MetalLB's
// internal packages; it is vigil's test code, not part of MetalLB.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"

	"go.universe.tf/metallb/internal/allocator"
	"go.universe.tf/metallb/internal/config"
	"go.universe.tf/metallb/internal/ipfamily"
	v1 "k8s.io/api/core/v1"
)

type port struct {
	Protocol string `json:"protocol"`
	Port     int    `json:"port"`
}

// op is one step: "alloc" clears the service and allocates as the controller's allocateIPs
// does after convergeBalancer cleared it; "assign" calls Assign with the IPs as they are;
// "release" unassigns the service; "setpools" replaces the pools (SetPools).
type op struct {
	Op        string                   `json:"op"`
	Resources *config.ClusterResources `json:"resources,omitempty"`
	Key       string                   `json:"key"`
	Service   *v1.Service              `json:"service,omitempty"`
	// Family of the service's cluster IPs: ipv4, ipv6 or dual.
	Family  string   `json:"family,omitempty"`
	Pool    string   `json:"pool,omitempty"`
	IPs     []string `json:"ips,omitempty"`
	Ports   []port   `json:"ports,omitempty"`
	Sharing string   `json:"sharing,omitempty"`
	Backend string   `json:"backend,omitempty"`
}

type scenario struct {
	Resources config.ClusterResources `json:"resources"`
	Ops       []op                    `json:"ops"`
}

type result struct {
	IPs      []string                          `json:"ips"`
	Pool     string                            `json:"pool"`
	Err      string                            `json:"err,omitempty"`
	Counters map[string]allocator.PoolCounters `json:"counters"`
}

type output struct {
	ConfigErr string   `json:"config_err,omitempty"`
	Results   []result `json:"results"`
	// Pools lists, per pool of the scenario's resources, the CIDRs config.For read from its
	// spec.addresses, in order, each as IPNet.String() prints it (for
	// crates/metallb/tests/pool_parse.rs). Absent when the configuration was refused.
	Pools map[string][]string `json:"pools,omitempty"`
}

func main() {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<26)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var s scenario
		if err := json.Unmarshal(in.Bytes(), &s); err != nil {
			fmt.Fprintf(os.Stderr, "metallb-alloc-probe: bad scenario: %v\n", err)
			os.Exit(2)
		}
		if err := out.Encode(run(&s)); err != nil {
			fmt.Fprintf(os.Stderr, "metallb-alloc-probe: %v\n", err)
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "metallb-alloc-probe: %v\n", err)
		os.Exit(2)
	}
}

func run(s *scenario) output {
	cfg, err := config.For(s.Resources, config.DontValidate, config.ForOptions{})
	if err != nil {
		return output{ConfigErr: err.Error()}
	}
	read := map[string][]string{}
	for name, p := range cfg.Pools.ByName {
		cidrs := []string{}
		for _, n := range p.CIDR {
			cidrs = append(cidrs, n.String())
		}
		read[name] = cidrs
	}
	a := allocator.New(func(string) {})
	a.SetPools(cfg.Pools)
	var res []result
	for _, o := range s.Ops {
		r := result{IPs: []string{}}
		switch o.Op {
		case "release":
			a.Unassign(o.Key)
		case "setpools":
			next, err := config.For(*o.Resources, config.DontValidate, config.ForOptions{})
			if err != nil {
				return output{ConfigErr: err.Error()}
			}
			cfg = next
			a.SetPools(cfg.Pools)
		case "assign":
			ips, err := parseIPs(o.IPs)
			if err == nil {
				err = a.Assign(o.Key, o.Service, ips, ports(&o), o.Sharing, o.Backend)
			}
			if err != nil {
				r.Err = err.Error()
			}
			for _, ip := range a.IPs(o.Key) {
				r.IPs = append(r.IPs, ip.String())
			}
			r.Pool = a.Pool(o.Key)
		case "alloc":
			a.Unassign(o.Key)
			ips, err := allocate(a, &o)
			if err != nil {
				r.Err = err.Error()
			}
			for _, ip := range ips {
				r.IPs = append(r.IPs, ip.String())
			}
			r.Pool = a.Pool(o.Key)
		default:
			r.Err = "unknown op " + o.Op
		}
		r.Counters = map[string]allocator.PoolCounters{}
		for name := range cfg.Pools.ByName {
			r.Counters[name] = a.CountersForPool(name)
		}
		res = append(res, r)
	}
	return output{Results: res, Pools: read}
}

// allocate follows controller/service.go:allocateIPs, with the requested IPs and pool given
// directly instead of read from annotations.
func allocate(a *allocator.Allocator, o *op) ([]net.IP, error) {
	family := ipfamily.Family(o.Family)
	if o.Family == "dual" {
		family = ipfamily.DualStack
	}
	ports := ports(o)
	if len(o.IPs) > 0 {
		ips, err := parseIPs(o.IPs)
		if err != nil {
			return nil, err
		}
		wanted, err := ipfamily.ForAddressesIPs(ips)
		if err != nil {
			return nil, err
		}
		if wanted != family {
			return nil, fmt.Errorf("requested loadBalancer IP(s) %q does not match the ipFamily of the service", ips)
		}
		if err := a.Assign(o.Key, o.Service, ips, ports, o.Sharing, o.Backend); err != nil {
			return nil, err
		}
		if o.Pool != "" && a.Pool(o.Key) != o.Pool {
			a.Unassign(o.Key)
			return nil, fmt.Errorf("requested loadBalancer IP(s) %q is not compatible with requested address pool %s", ips, o.Pool)
		}
		return ips, nil
	}
	if o.Pool != "" {
		return a.AllocateFromPool(o.Key, o.Service, family, o.Pool, ports, o.Sharing, o.Backend)
	}
	return a.Allocate(o.Key, o.Service, family, ports, o.Sharing, o.Backend)
}

func ports(o *op) []allocator.Port {
	var ports []allocator.Port
	for _, p := range o.Ports {
		ports = append(ports, allocator.Port{Proto: p.Protocol, Port: p.Port})
	}
	return ports
}

func parseIPs(list []string) ([]net.IP, error) {
	var ips []net.IP
	for _, s := range list {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("bad ip %q", s)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}
