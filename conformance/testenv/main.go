// Command vigil-testenv is a throwaway Kubernetes control plane for vigil's tests: the real
// kube-apiserver (k8s.io/kubernetes/cmd/kube-apiserver/app, run in this process) over an etcd
// embedded in the same process.
//
//	vigil-testenv --listen 198.18.0.2:6443 [--data-dir DIR] [--keep]
//	              [--token-auth-file FILE] [--ready-timeout 2m] [-- KUBE-APISERVER-FLAGS...]
//
// It makes its own CA, serving certificate, service-account key pair and admin client
// certificate (group system:masters), writes an admin kubeconfig into the data directory, and
// prints exactly one line on stdout once /readyz answers ok:
//
//	vigil-testenv: ready kubeconfig=<path> server=https://<addr>
//
// Everything else (kube-apiserver's and etcd's logs) goes to stderr. The data directory
// (certificates and etcd's data) is removed on exit unless --keep is given; started again on a
// kept directory, it reuses both, so a test can restart the API server over the same state.
// SIGTERM or SIGINT stops the API server gracefully, then etcd, and exits 0.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

// options are the command-line settings of vigil-testenv itself.
type options struct {
	listen        string
	dataDir       string
	keep          bool
	tokenFile     string
	readyTimeout  time.Duration
	serviceRange  string
	apiserverArgs []string
}

func main() {
	os.Exit(run())
}

func parseOptions() (options, error) {
	var o options
	fs := flag.NewFlagSet("vigil-testenv", flag.ContinueOnError)
	fs.StringVar(&o.listen, "listen", "", "address:port the API server listens on (required), e.g. 198.18.0.2:6443 or [2001:db8::2]:6443")
	fs.StringVar(&o.dataDir, "data-dir", "", "directory for certificates, kubeconfig and etcd data (default: a new temporary directory)")
	fs.BoolVar(&o.keep, "keep", false, "keep the data directory on exit (a later start reuses it)")
	fs.StringVar(&o.tokenFile, "token-auth-file", "", "static token file (CSV: token,user,uid,\"group1,group2\") handed to kube-apiserver")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 2*time.Minute, "give up when /readyz is not ok within this time")
	// Dual-stack by default, so tests can make IPv6 and dual-stack Services; the IPv6 range is
	// documentation space like every address in vigil's labs (ClusterIPs are only allocated
	// here, never routed: no kube-proxy runs).
	fs.StringVar(&o.serviceRange, "service-cluster-ip-range", "10.0.0.0/24,2001:db8:ffff::/112", "ClusterIP ranges for Services (one, or IPv4,IPv6)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return o, err
	}
	o.apiserverArgs = fs.Args()
	if o.listen == "" {
		return o, errors.New("--listen: required (address:port)")
	}
	host, port, err := net.SplitHostPort(o.listen)
	if err != nil {
		return o, fmt.Errorf("--listen %q: %v", o.listen, err)
	}
	if net.ParseIP(host) == nil {
		return o, fmt.Errorf("--listen %q: %q is not an IP address", o.listen, host)
	}
	if port == "" || port == "0" {
		return o, fmt.Errorf("--listen %q: needs a fixed port", o.listen)
	}
	if o.tokenFile != "" {
		abs, err := filepath.Abs(o.tokenFile)
		if err != nil {
			return o, fmt.Errorf("--token-auth-file: %v", err)
		}
		if _, err := os.Stat(abs); err != nil {
			return o, fmt.Errorf("--token-auth-file: %v", err)
		}
		o.tokenFile = abs
	}
	return o, nil
}

func run() int {
	o, err := parseOptions()
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "vigil-testenv: %v\n", err)
		return 2
	}

	// The command installs kube-apiserver's signal handling (SIGTERM/SIGINT cancel its
	// context; a second signal exits at once), so it is made first and its context governs
	// everything, etcd's start-up included.
	cmd := app.NewAPIServerCommand()
	ctx := cmd.Context()

	dir, created, err := prepareDataDir(o.dataDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vigil-testenv: --data-dir: %v\n", err)
		return 1
	}
	code := serve(ctx, cmd, o, dir)
	if !o.keep {
		if err := os.RemoveAll(dir); err != nil {
			fmt.Fprintf(os.Stderr, "vigil-testenv: removing %s: %v\n", dir, err)
		}
	} else if created {
		fmt.Fprintf(os.Stderr, "vigil-testenv: kept %s\n", dir)
	}
	return code
}

// serve runs etcd and the API server until the context ends or either fails; it returns the
// exit code.
func serve(ctx context.Context, cmd *cobra.Command, o options, dir string) int {
	host, _, _ := net.SplitHostPort(o.listen)
	pki, err := loadOrCreatePKI(filepath.Join(dir, "pki"), net.ParseIP(host))
	if err != nil {
		fmt.Fprintf(os.Stderr, "vigil-testenv: certificates: %v\n", err)
		return 1
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, "https://"+o.listen, pki); err != nil {
		fmt.Fprintf(os.Stderr, "vigil-testenv: kubeconfig: %v\n", err)
		return 1
	}

	store, err := startEtcd(ctx, dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vigil-testenv: etcd: %v\n", err)
		return 1
	}
	defer store.close()

	cmd.SetArgs(apiserverFlags(o, pki, store.clientURL))
	served := make(chan error, 1)
	go func() { served <- cmd.Execute() }()

	readyCtx, cancelReady := context.WithTimeout(ctx, o.readyTimeout)
	defer cancelReady()
	ready := make(chan error, 1)
	go func() { ready <- waitReady(readyCtx, o.listen, pki) }()

	for {
		select {
		case err := <-ready:
			ready = nil
			if err != nil {
				if ctx.Err() != nil {
					continue // stopping anyway; wait for the server to finish
				}
				fmt.Fprintf(os.Stderr, "vigil-testenv: not ready within %v: %v\n", o.readyTimeout, err)
				return 1
			}
			fmt.Printf("vigil-testenv: ready kubeconfig=%s server=https://%s\n", kubeconfig, o.listen)
		case err := <-store.failed():
			fmt.Fprintf(os.Stderr, "vigil-testenv: etcd failed: %v\n", err)
			return 1
		case err := <-served:
			if ctx.Err() != nil {
				// Stopped by a signal: the API server has shut down; etcd closes on return.
				if err != nil {
					fmt.Fprintf(os.Stderr, "vigil-testenv: kube-apiserver during shutdown: %v\n", err)
				}
				return 0
			}
			fmt.Fprintf(os.Stderr, "vigil-testenv: kube-apiserver stopped: %v\n", err)
			return 1
		}
	}
}

// prepareDataDir returns the data directory (made, mode 0700, when missing or not given) and
// whether this run created it.
func prepareDataDir(dir string) (string, bool, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "vigil-testenv-")
		return d, true, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false, err
	}
	if _, err := os.Stat(abs); err == nil {
		return abs, false, nil
	}
	return abs, true, os.MkdirAll(abs, 0o700)
}

// apiserverFlags are the kube-apiserver flags of a small single-node control plane with real
// authentication, RBAC and admission; flags after "--" on our command line come last, so they
// win.
func apiserverFlags(o options, pki *pki, etcdURL string) []string {
	host, port, _ := net.SplitHostPort(o.listen)
	issuer := "https://" + o.listen
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + host,
		"--secure-port=" + port,
		"--advertise-address=" + host,
		"--tls-cert-file=" + pki.servingCert,
		"--tls-private-key-file=" + pki.servingKey,
		"--client-ca-file=" + pki.caCert,
		"--service-account-issuer=" + issuer,
		"--service-account-key-file=" + pki.saPublic,
		"--service-account-signing-key-file=" + pki.saPrivate,
		"--api-audiences=" + issuer,
		"--service-cluster-ip-range=" + o.serviceRange,
		"--authorization-mode=Node,RBAC",
		// A normal cluster's admission chain (the defaults plus NodeRestriction, as kubeadm
		// sets up), minus ServiceAccount: it needs the service-account controller, which does
		// not run here, to make each namespace's "default" account before Pods can be created.
		"--enable-admission-plugins=NodeRestriction",
		"--disable-admission-plugins=ServiceAccount",
		"--allow-privileged=true",
		// The "kubernetes" Service's endpoints would need a controller loop that keeps
		// rewriting them; tests do not use it.
		"--endpoint-reconciler-type=none",
		// Priority and fairness runs its own config controllers and queues; on a 2-core test
		// machine that is CPU better spent on the tests. Re-enable with -- flags if wanted.
		"--enable-priority-and-fairness=false",
		// Prompt shutdown: no load balancer needs time to see /readyz fail, and open watches
		// (which otherwise hold the HTTP server's shutdown for the 60 s request timeout) are
		// cut 2 s after the other requests in flight have drained.
		"--shutdown-delay-duration=0s",
		"--shutdown-send-retry-after=true",
		"--profiling=false",
	}
	if o.tokenFile != "" {
		args = append(args, "--token-auth-file="+o.tokenFile)
	}
	return append(args, o.apiserverArgs...)
}
