package auth

import (
	"context"
	"errors"
	"testing"
)

// FuzzDecodeHash feeds arbitrary strings to decodeHash and, when the cost is
// small, to Verify. Neither may panic; decodeHash either refuses with
// ErrMalformedHash or returns parameters inside the bounds that keep a planted
// hash from costing gigabytes, and its result survives a re-encoding.
//
// Verify runs only for cheap parameters: the bounds still allow up to 1 GiB
// and 100 passes, which is legitimate for a stored hash but would make a fuzz
// run crawl or exhaust memory. Seeds live in testdata/fuzz/FuzzDecodeHash.
func FuzzDecodeHash(f *testing.F) {
	h := NewHasher(smallParams, 1)
	valid, err := h.Hash(context.Background(), "password")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add("")
	f.Fuzz(func(t *testing.T, encoded string) {
		p, salt, key, err := decodeHash(encoded)
		if err != nil {
			if !errors.Is(err, ErrMalformedHash) {
				t.Fatalf("decodeHash(%q) err = %v, want %v", encoded, err, ErrMalformedHash)
			}
			// Verify must refuse the same string without computing anything.
			if _, _, err := h.Verify(context.Background(), "password", encoded); !errors.Is(err, ErrMalformedHash) {
				t.Fatalf("Verify(%q) err = %v, want %v", encoded, err, ErrMalformedHash)
			}
			return
		}
		if p.MemoryKiB < 1 || p.MemoryKiB > maxMemoryKiB {
			t.Errorf("decodeHash(%q): m = %d outside [1, %d]", encoded, p.MemoryKiB, maxMemoryKiB)
		}
		if p.Iterations < 1 || p.Iterations > maxIterations {
			t.Errorf("decodeHash(%q): t = %d outside [1, %d]", encoded, p.Iterations, maxIterations)
		}
		if p.Parallelism < 1 {
			t.Errorf("decodeHash(%q): p = 0", encoded)
		}
		if len(salt) == 0 || len(key) == 0 {
			t.Errorf("decodeHash(%q): empty salt or key", encoded)
		}
		if got, want := p.SaltLen, uint32(len(salt)); got != want {
			t.Errorf("decodeHash(%q): SaltLen = %d, len(salt) = %d", encoded, got, want)
		}
		if got, want := p.KeyLen, uint32(len(key)); got != want {
			t.Errorf("decodeHash(%q): KeyLen = %d, len(key) = %d", encoded, got, want)
		}
		p2, salt2, key2, err := decodeHash(encodeHash(p, salt, key))
		if err != nil {
			t.Fatalf("re-encoding of %q does not decode: %v", encoded, err)
		}
		if p2 != p || string(salt2) != string(salt) || string(key2) != string(key) {
			t.Errorf("re-encoding of %q changed it: %+v → %+v", encoded, p, p2)
		}
		if p.MemoryKiB <= 256 && p.Iterations <= 2 && p.Parallelism <= 4 && len(key) <= 256 {
			if _, _, err := h.Verify(context.Background(), "password", encoded); err != nil {
				t.Errorf("Verify(%q) = %v after decodeHash accepted it", encoded, err)
			}
		}
	})
}
