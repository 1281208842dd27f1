package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// pki holds the paths of the control plane's key material, all under one directory.
type pki struct {
	caCert, caKey           string
	servingCert, servingKey string
	adminCert, adminKey     string
	saPublic, saPrivate     string
}

func pkiIn(dir string) *pki {
	p := func(name string) string { return filepath.Join(dir, name) }
	return &pki{
		caCert: p("ca.crt"), caKey: p("ca.key"),
		servingCert: p("serving.crt"), servingKey: p("serving.key"),
		adminCert: p("admin.crt"), adminKey: p("admin.key"),
		saPublic: p("sa.pub"), saPrivate: p("sa.key"),
	}
}

// The serving certificate's names besides the listen address: loopback (for clients inside
// the control plane's own namespace) and the names in-cluster clients would use.
var (
	servingIPs = []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1"), net.ParseIP("10.0.0.1")}
	servingDNS = []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
)

// AdminUser is the admin client certificate's user; its group system:masters is bound to
// cluster-admin by RBAC's bootstrap policy.
const adminUser = "vigil-admin"

// loadOrCreatePKI reuses the key material in dir when it is all there (a restart over a kept
// data directory), and makes it otherwise. A serving certificate that does not name listenIP
// (the same directory started on another address) is replaced, signed by the same CA.
func loadOrCreatePKI(dir string, listenIP net.IP) (*pki, error) {
	p := pkiIn(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caCert, caKey, err := loadPair(p.caCert, p.caKey)
	if errors.Is(err, os.ErrNotExist) {
		caCert, caKey, err = makeCA(p)
	}
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	serving, _, err := loadPair(p.servingCert, p.servingKey)
	if err == nil && !slices.ContainsFunc(serving.IPAddresses, listenIP.Equal) {
		err = os.ErrNotExist
	}
	if errors.Is(err, os.ErrNotExist) {
		err = makeLeaf(p.servingCert, p.servingKey, caCert, caKey, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "vigil-testenv-apiserver"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IPAddresses: append([]net.IP{listenIP}, servingIPs...),
			DNSNames:    servingDNS,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("serving certificate: %w", err)
	}
	if _, _, err = loadPair(p.adminCert, p.adminKey); errors.Is(err, os.ErrNotExist) {
		err = makeLeaf(p.adminCert, p.adminKey, caCert, caKey, &x509.Certificate{
			Subject:     pkix.Name{CommonName: adminUser, Organization: []string{"system:masters"}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
	}
	if err != nil {
		return nil, fmt.Errorf("admin certificate: %w", err)
	}
	if _, err = os.Stat(p.saPrivate); errors.Is(err, os.ErrNotExist) {
		err = makeServiceAccountKeys(p)
	}
	if err != nil {
		return nil, fmt.Errorf("service-account keys: %w", err)
	}
	return p, nil
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
}

func makeCA(p *pki) (*x509.Certificate, crypto.Signer, error) {
	key, err := newKey()
	if err != nil {
		return nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "vigil-testenv-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePair(p.caCert, p.caKey, der, key); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// makeLeaf fills in the validity and key fields of tmpl, signs it with the CA and writes the
// certificate and its new key.
func makeLeaf(certPath, keyPath string, ca *x509.Certificate, caKey crypto.Signer, tmpl *x509.Certificate) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	sn, err := serial()
	if err != nil {
		return err
	}
	now := time.Now()
	tmpl.SerialNumber = sn
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(5 * 365 * 24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return err
	}
	return writePair(certPath, keyPath, der, key)
}

func makeServiceAccountKeys(p *pki) error {
	key, err := newKey()
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	if err := writePEM(p.saPublic, "PUBLIC KEY", pub, 0o644); err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(p.saPrivate, "EC PRIVATE KEY", der, 0o600)
}

func writePair(certPath, keyPath string, certDER []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	// The key goes first, so an interrupted run never leaves a certificate whose key is
	// missing or stale behind it.
	if err := writePEM(keyPath, "EC PRIVATE KEY", keyDER, 0o600); err != nil {
		return err
	}
	return writePEM(certPath, "CERTIFICATE", certDER, 0o644)
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// loadPair reads a certificate and its EC key; a missing file is os.ErrNotExist.
func loadPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	certDER, err := readPEM(certPath, "CERTIFICATE")
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := readPEM(keyPath, "EC PRIVATE KEY")
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", certPath, err)
	}
	key, err := x509.ParseECPrivateKey(keyDER)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	return cert, key, nil
}

func readPEM(path, kind string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != kind {
		return nil, fmt.Errorf("%s: no %s PEM block", path, kind)
	}
	return block.Bytes, nil
}
