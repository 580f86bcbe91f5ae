package http

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"maps"
	"net/http"
	"slices"
	"strings"

	"herald/model"
)

// Idempotency-Key (draft-ietf-httpapi-idempotency-key-header): a client
// that sends a create with a key of its own may send it again, with the
// same key and body, as often as it likes within model.IdempotencyWindow;
// one create is made, and every retry gets its first answer (status, body,
// Location, ETag) rebuilt from the store's record and the retry's own
// body. The record is written in the create's transaction, so a create
// that committed but whose answer was lost is found by the retry, on any
// instance and after a restart. A retry never waits on an "in progress"
// state: the store looks for the record inside its write transaction,
// which the first create's transaction has ended before it, so the
// draft's 409 for a key in use never arises.
//
// Only the creates of messages take a key. Those creates whose answer
// shows a secret once (a login's or a registration's token, an
// invitation's or a reset's code) could not be answered again without
// storing the secret readable, and the other writes either can be
// repeated as they are or say on a repeat what happened (a second logout
// is a 401, an edit with If-Match a 412). So every POST or PATCH that
// does not take a key refuses one, rather than let a client believe its
// retries safe where they are not. GET, HEAD and DELETE are idempotent
// by their method (RFC 9110), which a key adds nothing to: they ignore
// one, as the draft lets a server do.

const (
	idempotencyKeyHeader = "Idempotency-Key"
	// maxIdempotencyKeyBytes bounds a key; the draft sets no bound, and a
	// UUID takes 36.
	maxIdempotencyKeyBytes = 255
)

// keyedCreates are the routes that take an Idempotency-Key (method and
// path), each with the operation its fingerprint names: the two paths of
// a message create are one operation, so a retry on either finds a create
// made on the other.
var keyedCreates = map[[2]string]string{
	{http.MethodPost, "/api/message"}:  "message",
	{http.MethodPost, "/api/messages"}: "message",
}

// refuseUntakenKey refuses a POST or PATCH that carries an
// Idempotency-Key to a route that takes none.
func refuseUntakenKey(r *http.Request, rt route) error {
	if rt.method != http.MethodPost && rt.method != http.MethodPatch || len(r.Header.Values(idempotencyKeyHeader)) == 0 {
		return nil
	}
	if _, takes := keyedCreates[[2]string{rt.method, rt.path}]; takes {
		return nil
	}
	return badRequest(idempotencyKeyHeader, "this operation does not take an Idempotency-Key; only creates of messages"+
		" (POST /api/messages, POST /api/message) do: other operations either show a secret once or can be repeated as they are")
}

// idempotencyKey reads the request's Idempotency-Key: "" when it has
// none. Errors: 400 naming the header when it is given twice, is not a
// structured-field string (RFC 8941: printable ASCII in double quotes,
// with \" and \\ escaped), is empty or is longer than
// maxIdempotencyKeyBytes.
func idempotencyKey(r *http.Request) (string, error) {
	values := r.Header.Values(idempotencyKeyHeader)
	switch len(values) {
	case 0:
		return "", nil
	case 1:
	default:
		return "", badRequest(idempotencyKeyHeader, "Idempotency-Key is given more than once")
	}
	key, ok := parseStructuredString(strings.Trim(values[0], " "))
	switch {
	case !ok:
		return "", badRequest(idempotencyKeyHeader, `Idempotency-Key must be a structured-field string: printable ASCII in double quotes,`+
			` such as "8e03978e-40d5-43e8-bc93-6894a57f9324"`)
	case key == "":
		return "", badRequest(idempotencyKeyHeader, "Idempotency-Key is empty; send a new random value for each request, such as a UUID")
	case len(key) > maxIdempotencyKeyBytes:
		return "", badRequest(idempotencyKeyHeader, "Idempotency-Key is longer than %d characters", maxIdempotencyKeyBytes)
	}
	return key, nil
}

// parseStructuredString reads an RFC 8941 sf-string that makes up all of
// s, with no parameters (the draft defines none), and returns its value.
func parseStructuredString(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			if i++; i == len(s) || s[i] != '"' && s[i] != '\\' {
				return "", false
			}
			b.WriteByte(s[i])
		case c == '"':
			return b.String(), i == len(s)-1
		case c < 0x20 || c > 0x7e:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return "", false // no closing quote
}

// idempotencyFor is the key as the store keeps it for a request of
// operation whose body gave fields: the SHA-256 of the key, and a
// fingerprint of the request.
//
// The fingerprint covers the operation and the fields the body gave it,
// each name with its value (or JSON null), in name order, not the body's
// bytes: the same fields sent as JSON with other spacing, as a form, or
// as multipart/form-data with another boundary (which clients draw anew
// for every request, retries included) are the same request, and any
// difference in what the request asks for is another. It is an HMAC keyed
// with the key itself, so a stored fingerprint confirms no guess at a
// message's content to anyone without the key.
func idempotencyFor(key, operation string, f fields) model.IdempotencyKey {
	mac := hmac.New(sha256.New, []byte(key))
	var n [binary.MaxVarintLen64]byte
	write := func(s string) {
		mac.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		mac.Write([]byte(s))
	}
	write(operation)
	for _, name := range slices.Sorted(maps.Keys(f)) {
		write(name)
		if v := f[name]; v == nil {
			mac.Write([]byte{0})
		} else {
			mac.Write([]byte{1})
			write(*v)
		}
	}
	k := model.IdempotencyKey{ID: sha256.Sum256([]byte(key))}
	mac.Sum(k.Fingerprint[:0])
	return k
}
