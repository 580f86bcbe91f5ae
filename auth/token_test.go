package auth_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"

	"herald/auth"
)

// Token layout, restated here from the format description so the tests
// check the documented format rather than the code's own helpers.
const (
	bodyLen  = 43 // base64url of 32 bytes, unpadded
	checkLen = 6  // base64url of a 4-byte CRC-32, unpadded
)

// checksum is the documented checksum: base64url(CRC-32/IEEE big-endian) of
// the body.
func checksum(body string) string {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.ChecksumIEEE([]byte(body)))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// tokenFromBody builds a token with a correct checksum around any body.
func tokenFromBody(body string) string { return auth.TokenPrefix + body + checksum(body) }

func mustMint(t testing.TB) (string, [32]byte) {
	t.Helper()
	token, hash, err := auth.MintToken()
	if err != nil {
		t.Fatalf("MintToken: %v", err)
	}
	return token, hash
}

func TestTokenConstants(t *testing.T) {
	if got, want := auth.TokenPrefix, "herald_"; got != want {
		t.Errorf("TokenPrefix = %q, want %q", got, want)
	}
	if got, want := auth.TokenLen, len("herald_")+bodyLen+checkLen; got != want {
		t.Errorf("TokenLen = %d, want %d", got, want)
	}
}

func TestMintToken(t *testing.T) {
	const n = 1000
	seen := make(map[string]bool, n)
	bodies := make(map[string]bool, n)
	for range n {
		token, hash := mustMint(t)
		if !strings.HasPrefix(token, auth.TokenPrefix) {
			t.Fatalf("token %q lacks prefix %q", token, auth.TokenPrefix)
		}
		if got, want := len(token), auth.TokenLen; got != want {
			t.Fatalf("len(%q) = %d, want %d", token, got, want)
		}
		if got, want := hash, auth.HashToken(token); got != want {
			t.Fatalf("MintToken hash = %x, HashToken = %x", got, want)
		}
		if got, want := hash, sha256.Sum256([]byte(token)); got != want {
			t.Fatalf("MintToken hash = %x, sha256 = %x", got, want)
		}
		if !auth.WellFormedToken(token) {
			t.Fatalf("WellFormedToken(%q) = false for a minted token", token)
		}
		body := token[len(auth.TokenPrefix) : len(auth.TokenPrefix)+bodyLen]
		random, err := base64.RawURLEncoding.Strict().DecodeString(body)
		if err != nil {
			t.Fatalf("body %q of %q: %v", body, token, err)
		}
		if got, want := len(random), 32; got != want {
			t.Fatalf("token %q carries %d random bytes, want %d (256 bits)", token, got, want)
		}
		if got, want := token[len(auth.TokenPrefix)+bodyLen:], checksum(body); got != want {
			t.Fatalf("checksum of %q = %q, want %q", token, got, want)
		}
		if seen[token] || bodies[string(random)] {
			t.Fatalf("token %q minted twice", token)
		}
		seen[token], bodies[string(random)] = true, true
	}
}

func TestHashToken(t *testing.T) {
	for _, s := range []string{"", "herald_", "x"} {
		if got, want := auth.HashToken(s), sha256.Sum256([]byte(s)); got != want {
			t.Errorf("HashToken(%q) = %x, want %x", s, got, want)
		}
	}
	a, _ := mustMint(t)
	b, _ := mustMint(t)
	if auth.HashToken(a) == auth.HashToken(b) {
		t.Errorf("distinct tokens %q, %q share a hash", a, b)
	}
}

// replaceAt returns s with the byte at i replaced by a different
// base64url character.
func replaceAt(s string, i int) string {
	c := byte('A')
	if s[i] == c {
		c = 'B'
	}
	return s[:i] + string(c) + s[i+1:]
}

func TestWellFormedToken(t *testing.T) {
	token, _ := mustMint(t)
	prefixLen := len(auth.TokenPrefix)
	body := token[prefixLen : prefixLen+bodyLen]
	check := token[prefixLen+bodyLen:]
	zeroBody := base64.RawURLEncoding.EncodeToString(make([]byte, 32)) // "AAAA...A"

	tests := []struct {
		name  string
		token string
		want  bool
	}{
		{"Minted", token, true},
		{"BuiltFromDocumentedFormat", tokenFromBody(zeroBody), true},
		{"Empty", "", false},
		{"PrefixOnly", auth.TokenPrefix, false},
		{"PrefixMissing", body + check, false},
		{"WrongPrefix", "github_" + body + check, false},
		{"PrefixUpperCase", "HERALD_" + body + check, false},
		{"PrefixDash", "herald-" + body + check, false},
		{"BodyCharChanged", replaceAt(token, prefixLen), false},
		{"BodyMiddleCharChanged", replaceAt(token, prefixLen+20), false},
		{"CheckCharChanged", replaceAt(token, prefixLen+bodyLen), false},
		{"CheckLastCharChanged", replaceAt(token, auth.TokenLen-1), false},
		{"ChecksumOfOtherToken", auth.TokenPrefix + body + checksum(zeroBody), false},
		{"OneShort", token[:auth.TokenLen-1], false},
		{"OneLong", token + "A", false},
		{"Doubled", token + token, false},
		{"LeadingSpace", " " + token[:auth.TokenLen-1], false},
		{"TrailingNewline", token + "\n", false},
		{"BodyStdAlphabetPlus", tokenFromBody("+" + zeroBody[1:]), false},
		{"BodyStdAlphabetSlash", tokenFromBody("/" + zeroBody[1:]), false},
		{"BodyNonBase64", tokenFromBody("*" + zeroBody[1:]), false},
		{"BodyPaddingChar", tokenFromBody(zeroBody[:bodyLen-1] + "="), false},
		{"BodyPadded", tokenFromBody(base64.URLEncoding.EncodeToString(make([]byte, 32))), false},
		{"BodyNonCanonical", tokenFromBody(zeroBody[:bodyLen-1] + "B"), false}, // stray bits in the last character
		{"BodyNonASCII", tokenFromBody("é" + zeroBody[2:]), false},
		{"BodyNUL", tokenFromBody("\x00" + zeroBody[1:]), false},
		// base64 decoders skip CR and LF, even in Strict mode; a token with
		// one in its body is not the shape of anything we minted.
		{"BodyNewline", tokenFromBody(zeroBody[:10] + "\n" + zeroBody[11:]), false},
		{"BodyCarriageReturn", tokenFromBody(zeroBody[:10] + "\r" + zeroBody[11:]), false},
		{"CheckPadded", auth.TokenPrefix + zeroBody + checksum(zeroBody)[:checkLen-1] + "=", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := auth.WellFormedToken(tt.token), tt.want; got != want {
				t.Errorf("WellFormedToken(%q) = %v, want %v", tt.token, got, want)
			}
		})
	}
}

// TestCodes: invitation and reset codes have the tokens' shape under
// prefixes of their own, so none passes for another kind.
func TestCodes(t *testing.T) {
	for _, prefix := range []string{auth.TokenPrefix, auth.InvitePrefix, auth.ResetPrefix} {
		code, hash, err := auth.MintCode(prefix)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(code, prefix) || hash != auth.HashToken(code) || !auth.WellFormedCode(prefix, code) {
			t.Errorf("MintCode(%q) = %q, %x", prefix, code, hash)
		}
		for _, other := range []string{auth.TokenPrefix, auth.InvitePrefix, auth.ResetPrefix} {
			if other != prefix && auth.WellFormedCode(other, code) {
				t.Errorf("a %q code is well formed as a %q one", prefix, other)
			}
		}
		if prefix != auth.TokenPrefix && auth.WellFormedToken(code) {
			t.Errorf("a %q code is a well-formed token", prefix)
		}
	}
}
