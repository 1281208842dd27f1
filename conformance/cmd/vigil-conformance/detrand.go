package main

// Reproducible nonces.  memberlist's encryptPayload reads its 12-byte nonce
// from crypto/rand.Reader, so the vectors command swaps that reader for a
// deterministic one (re-seeded per vector from the vector's name) and records
// what was handed out.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"io"
)

// detReader is SHA-256 in counter mode over a seed: not secret, just
// reproducible and different for every vector name.
type detReader struct {
	seed    []byte
	fixed   []byte // if set, served verbatim (for the research-note vectors)
	counter uint64
	pending []byte
	served  []byte
}

func (r *detReader) Read(p []byte) (int, error) {
	if r.fixed != nil {
		n := copy(p, r.fixed)
		r.fixed = r.fixed[n:]
		r.served = append(r.served, p[:n]...)
		if n == 0 {
			return 0, io.EOF
		}
		return n, nil
	}
	for len(r.pending) < len(p) {
		block := make([]byte, len(r.seed)+8)
		copy(block, r.seed)
		binary.BigEndian.PutUint64(block[len(r.seed):], r.counter)
		r.counter++
		sum := sha256.Sum256(block)
		r.pending = append(r.pending, sum[:]...)
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	r.served = append(r.served, p[:n]...)
	return n, nil
}

var systemRandom = rand.Reader

// seedNonces installs a fresh deterministic crypto/rand.Reader for one
// vector.  fixed, if non-nil, is the exact byte stream to serve.
func seedNonces(name string, fixed []byte) *detReader {
	r := &detReader{seed: []byte("vigil-conformance/" + name)}
	if fixed != nil {
		r.fixed = append([]byte{}, fixed...)
	}
	rand.Reader = r
	return r
}

// restoreRandom puts the real crypto/rand.Reader back (bench, decode).
func restoreRandom() {
	rand.Reader = systemRandom
}
