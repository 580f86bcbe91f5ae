package http

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"herald/bolt"
)

// API representations. They are separate from the bolt types so the wire
// shape is explicit and nothing (a password hash, say) leaks by accident.

// timeLayout is RFC 3339 in UTC with a fixed six-digit fraction: the
// precision the store keeps, so a value read back compares equal.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// apiTime marshals as timeLayout.
type apiTime time.Time

func (t apiTime) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(timeLayout)+2)
	b = append(b, '"')
	b = time.Time(t).UTC().AppendFormat(b, timeLayout)
	return append(b, '"'), nil
}

type userJSON struct {
	ID        uint64   `json:"id"`
	Email     string   `json:"email"`
	Roles     []string `json:"roles"`
	CreatedAt apiTime  `json:"createdAt"`
}

func newUserJSON(u *bolt.User) userJSON {
	return userJSON{ID: u.ID, Email: u.Email, Roles: u.Roles, CreatedAt: apiTime(u.CreatedAt)}
}

// registeredJSON is the answer to registration: the account plus the token
// issued with it.
type registeredJSON struct {
	userJSON
	Token     string  `json:"token"`
	ExpiresAt apiTime `json:"expiresAt"`
}

type tokenJSON struct {
	Token     string  `json:"token"`
	ExpiresAt apiTime `json:"expiresAt"`
}

type ownerJSON struct {
	Email string `json:"email"`
}

// messageJSON is the seed's message_basic group.
type messageJSON struct {
	ID        uint64    `json:"id"`
	Content   string    `json:"content"`
	User      ownerJSON `json:"user"`
	CreatedAt apiTime   `json:"createdAt"`
	UpdatedAt apiTime   `json:"updatedAt"`
}

func newMessageJSON(m *bolt.Message) messageJSON {
	return messageJSON{
		ID:        m.ID,
		Content:   m.Content,
		User:      ownerJSON{Email: m.OwnerEmail},
		CreatedAt: apiTime(m.CreatedAt),
		UpdatedAt: apiTime(m.UpdatedAt),
	}
}

type pageJSON struct {
	Items []messageJSON `json:"items"`
	Next  *string       `json:"next"`
}

// messagePath is the canonical URL path of a message.
func messagePath(id uint64) string { return "/api/messages/" + strconv.FormatUint(id, 10) }

// etag is a strong entity tag for a message's current representation. The
// revision changes with every edit; the ID keeps tags of different messages
// apart.
func etag(m *bolt.Message) string {
	return `"` + strconv.FormatUint(m.ID, 10) + "-" + strconv.FormatUint(m.Revision, 10) + `"`
}

// writeJSON writes v with status. Encoding happens before the header is
// sent, so a marshalling failure can still become a clean 500.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeBody(w, "application/json", status, b)
}

// marshal encodes v as one line of JSON. HTML escaping is off: the body is
// served as JSON with nosniff, and clients should see "<" as written.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeBody(w http.ResponseWriter, contentType string, status int, body []byte) {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
