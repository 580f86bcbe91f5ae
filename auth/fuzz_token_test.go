package auth_test

import (
	"strings"
	"testing"

	"herald/auth"
)

const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// FuzzWellFormedToken: WellFormedToken never panics, and whatever it accepts
// has the prefix, the exact length and nothing but base64url after the
// prefix. Seeds live in testdata/fuzz/FuzzWellFormedToken.
func FuzzWellFormedToken(f *testing.F) {
	token, _ := mustMint(f)
	f.Add(token)
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if !auth.WellFormedToken(s) {
			return
		}
		if !strings.HasPrefix(s, auth.TokenPrefix) {
			t.Errorf("accepted %q without prefix %q", s, auth.TokenPrefix)
		}
		if got, want := len(s), auth.TokenLen; got != want {
			t.Errorf("accepted %q of length %d, want %d", s, got, want)
		}
		if rest := strings.TrimPrefix(s, auth.TokenPrefix); strings.Trim(rest, base64URLAlphabet) != "" {
			t.Errorf("accepted %q with characters outside base64url", s)
		}
		// Accepted tokens hash like any other string.
		if auth.HashToken(s) == auth.HashToken(s+"x") {
			t.Errorf("HashToken collision on %q", s)
		}
	})
}
