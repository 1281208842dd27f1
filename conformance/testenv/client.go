package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// writeKubeconfig writes an admin kubeconfig for server with the certificates inlined, so it
// works from any namespace and working directory.
func writeKubeconfig(path, server string, p *pki) error {
	ca, err := os.ReadFile(p.caCert)
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(p.adminCert)
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.adminKey)
	if err != nil {
		return err
	}
	b64 := base64.StdEncoding.EncodeToString
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Config\n")
	fmt.Fprintf(&b, "clusters:\n- name: vigil-testenv\n  cluster:\n    server: %s\n    certificate-authority-data: %s\n", server, b64(ca))
	fmt.Fprintf(&b, "users:\n- name: %s\n  user:\n    client-certificate-data: %s\n    client-key-data: %s\n", adminUser, b64(cert), b64(key))
	fmt.Fprintf(&b, "contexts:\n- name: vigil-testenv\n  context:\n    cluster: vigil-testenv\n    user: %s\n    namespace: default\n", adminUser)
	fmt.Fprintf(&b, "current-context: vigil-testenv\n")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// waitReady polls the API server as the admin until /readyz is ok and the "default"
// namespace exists (the API server makes it in a start-up hook that /readyz does not wait
// for), or ctx ends. It returns the last failure on timeout.
func waitReady(ctx context.Context, listen string, p *pki) error {
	client, err := adminHTTPClient(p)
	if err != nil {
		return err
	}
	defer client.CloseIdleConnections()
	last := fmt.Errorf("no answer yet")
	for _, path := range []string{"/readyz", "/api/v1/namespaces/default"} {
		for {
			err := get(ctx, client, "https://"+listen+path)
			if err == nil {
				break
			}
			last = err
			select {
			case <-ctx.Done():
				return last
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	return nil
}

func get(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func adminHTTPClient(p *pki) (*http.Client, error) {
	caPEM, err := os.ReadFile(p.caCert)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s: no certificate", p.caCert)
	}
	admin, err := tls.LoadX509KeyPair(p.adminCert, p.adminKey)
	if err != nil {
		return nil, err
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{admin}},
			// Never a proxy from the environment: the server is in our own namespace.
			Proxy: nil,
		},
	}, nil
}
