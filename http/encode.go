package http

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"herald/http/apijson"
	"herald/model"
)

// API representations. They are separate from the model types so the wire
// shape is explicit and nothing (a password hash, say) leaks by accident.

// apiTime marshals as timeLayout.
type apiTime time.Time

func (t apiTime) MarshalJSON() ([]byte, error) {
	b := make([]byte, 0, len(apijson.TimeLayout)+2)
	b = append(b, '"')
	b = apijson.AppendTime(b, time.Time(t))
	return append(b, '"'), nil
}

type userJSON struct {
	ID        uint64   `json:"id"`
	Email     string   `json:"email"`
	Roles     []string `json:"roles"`
	CreatedAt apiTime  `json:"createdAt"`
}

func newUserJSON(u *model.User) userJSON {
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

// messagePath is the canonical URL path of a message.
func messagePath(id uint64) string { return "/api/messages/" + strconv.FormatUint(id, 10) }

// etag is a strong entity tag for a message's current representation. The
// revision changes with every edit; the ID keeps tags of different messages
// apart.
func etag(m *model.Message) string {
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
	// With the length known, net/http sends the body as it is rather than
	// in chunked encoding, which a page of messages would otherwise need.
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeMessage writes one message as the response body.
func writeMessage(w http.ResponseWriter, status int, m *model.Message) {
	writeBody(w, "application/json", status, append(apijson.AppendMessage(make([]byte, 0, 256+len(m.Content)), m), '\n'))
}
