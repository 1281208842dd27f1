package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// etcdStore is the etcd member embedded in this process, serving kube-apiserver only, on
// loopback.
type etcdStore struct {
	etcd      *embed.Etcd
	clientURL string
}

// startEtcd starts (or restarts, over existing data) the single etcd member under dir/etcd
// and waits until it serves. Its two loopback ports are chosen on the first start and saved
// in dir/etcd-ports: the member's peer address is part of its stored cluster membership, so
// a restart over the same data must bind the same one.
func startEtcd(ctx context.Context, dir string) (*etcdStore, error) {
	client, peer, err := etcdPorts(filepath.Join(dir, "etcd-ports"))
	if err != nil {
		return nil, err
	}
	loopback := func(port int) url.URL {
		return url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	}
	cfg := embed.NewConfig()
	cfg.Name = "vigil-testenv"
	cfg.Dir = filepath.Join(dir, "etcd")
	// Test data is thrown away; durability is not worth an fsync per write on a shared disk.
	cfg.UnsafeNoFsync = true
	cfg.ListenClientUrls = []url.URL{loopback(client)}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.ListenPeerUrls = []url.URL{loopback(peer)}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"stderr"}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return &etcdStore{etcd: e, clientURL: cfg.ListenClientUrls[0].String()}, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-time.After(time.Minute):
		e.Close()
		return nil, errors.New("not ready within a minute")
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
}

// failed reports a serving error of etcd after start-up.
func (s *etcdStore) failed() <-chan error { return s.etcd.Err() }

// close stops etcd and waits until its data is written and its listeners are closed.
func (s *etcdStore) close() { s.etcd.Close() }

// etcdPorts reads the saved client and peer ports, or picks two free loopback ports and saves
// them.
func etcdPorts(path string) (int, int, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		var client, peer int
		if _, err := fmt.Sscanf(strings.TrimSpace(string(data)), "%d %d", &client, &peer); err != nil {
			return 0, 0, fmt.Errorf("%s: %v", path, err)
		}
		return client, peer, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return 0, 0, err
	}
	client, err := freePort()
	if err != nil {
		return 0, 0, err
	}
	peer, err := freePort()
	for err == nil && peer == client {
		peer, err = freePort()
	}
	if err != nil {
		return 0, 0, err
	}
	return client, peer, os.WriteFile(path, fmt.Appendf(nil, "%d %d\n", client, peer), 0o600)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
