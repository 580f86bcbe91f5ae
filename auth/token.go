package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"strings"
)

// Token format: TokenPrefix, 43 characters of base64url carrying 256 random
// bits, then 6 characters of base64url carrying a CRC-32 of the random part.
// The prefix lets secret scanners spot a leaked token; the checksum lets them
// (and us) reject a mistyped or made-up token without a database lookup.
// Invitation and password-reset codes have the same shape with prefixes of
// their own, so a scanner tells what leaked and none passes for another.
const (
	TokenPrefix   = "herald_"
	InvitePrefix  = "herald_invite_"
	ResetPrefix   = "herald_reset_"
	tokenRandLen  = 32
	tokenBodyLen  = 43 // base64url, unpadded, of 32 bytes
	tokenCheckLen = 6  // base64url, unpadded, of 4 bytes
	TokenLen      = len(TokenPrefix) + tokenBodyLen + tokenCheckLen
)

// MintToken returns a new random bearer token and the hash to store for it.
func MintToken() (token string, hash [32]byte, err error) { return MintCode(TokenPrefix) }

// MintCode returns a new random secret with the readable prefix, in the
// tokens' shape, and the hash to store for it.
func MintCode(prefix string) (code string, hash [32]byte, err error) {
	random := make([]byte, tokenRandLen)
	if _, err := rand.Read(random); err != nil {
		return "", hash, err
	}
	body := base64.RawURLEncoding.EncodeToString(random)
	code = prefix + body + checksum(body)
	return code, HashToken(code), nil
}

// HashToken is the only form of a token the database sees. A plain SHA-256
// suffices: the input carries 256 random bits, so there is nothing to
// brute-force, and lookups stay cheap on every request.
func HashToken(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// WellFormedToken reports whether token has the shape and checksum of one we
// minted. It is a cheap filter before the lookup, not proof of validity.
func WellFormedToken(token string) bool { return WellFormedCode(TokenPrefix, token) }

// WellFormedCode is WellFormedToken for a secret minted by MintCode with
// prefix.
func WellFormedCode(prefix, code string) bool {
	if len(code) != len(prefix)+tokenBodyLen+tokenCheckLen || !strings.HasPrefix(code, prefix) {
		return false
	}
	rest := code[len(prefix):]
	// Check the alphabet by hand: Go's base64 decoder skips '\r' and '\n'
	// even in strict mode, so decoding alone would accept them.
	for i := 0; i < len(rest); i++ {
		if !isBase64URL(rest[i]) {
			return false
		}
	}
	body := rest[:tokenBodyLen]
	if _, err := base64.RawURLEncoding.Strict().DecodeString(body); err != nil {
		return false // stray bits in the last character
	}
	return rest[tokenBodyLen:] == checksum(body)
}

func isBase64URL(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_'
}

func checksum(body string) string {
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.ChecksumIEEE([]byte(body)))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
