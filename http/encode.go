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
	Handle    string   `json:"handle"`
	Name      string   `json:"name"`
	Roles     []string `json:"roles"`
	CreatedAt apiTime  `json:"createdAt"`
}

func newUserJSON(u *model.User) userJSON {
	return userJSON{ID: u.ID, Email: u.Email, Handle: u.Handle, Name: u.Name, Roles: u.Roles, CreatedAt: apiTime(u.CreatedAt)}
}

// profileJSON is an account as anyone with a token may see it: no
// e-mail, no roles.
type profileJSON struct {
	ID        uint64  `json:"id"`
	Handle    string  `json:"handle"`
	Name      string  `json:"name"`
	CreatedAt apiTime `json:"createdAt"`
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

// adminUserJSON is an account as administrators see it.
type adminUserJSON struct {
	userJSON
	LastSeenAt *apiTime `json:"lastSeenAt"`
	Messages   int      `json:"messages"`
	Suspended  bool     `json:"suspended"`
}

func newAdminUserJSON(a *model.Account) adminUserJSON {
	out := adminUserJSON{userJSON: newUserJSON(&a.User), Messages: a.Messages, Suspended: a.Suspended}
	if !a.LastSeenAt.IsZero() {
		seen := apiTime(a.LastSeenAt)
		out.LastSeenAt = &seen
	}
	return out
}

type accountPageJSON struct {
	Items []adminUserJSON `json:"items"`
	Next  *string         `json:"next"`
}

// inviteJSON is an invitation; its code and link only in the answer that
// made it.
type inviteJSON struct {
	ID        uint64  `json:"id"`
	Code      string  `json:"code,omitempty"`
	URL       string  `json:"url,omitempty"`
	MaxUses   int     `json:"maxUses"`
	Uses      int     `json:"uses"`
	ExpiresAt apiTime `json:"expiresAt"`
	CreatedAt apiTime `json:"createdAt"`
}

func newInviteJSON(inv *model.Invite) inviteJSON {
	return inviteJSON{ID: inv.ID, MaxUses: inv.MaxUses, Uses: inv.Uses, ExpiresAt: apiTime(inv.ExpiresAt), CreatedAt: apiTime(inv.CreatedAt)}
}

type inviteListJSON struct {
	Items []inviteJSON `json:"items"`
}

// resetJSON is a password reset as its administrator sees it, once.
type resetJSON struct {
	Code      string  `json:"code"`
	URL       string  `json:"url"`
	ExpiresAt apiTime `json:"expiresAt"`
}

// auditJSON is one administrative act.
type auditJSON struct {
	ID     uint64           `json:"id"`
	At     apiTime          `json:"at"`
	Actor  auditByJSON      `json:"actor"`
	Action string           `json:"action"`
	Target *auditTargetJSON `json:"target"`
	Count  *int             `json:"count,omitempty"`
	// Settings are what a settings-update changed, with their new values.
	Settings map[string]string `json:"settings,omitempty"`
}

// auditByJSON is who made an act: an administrator ("user", with the ID
// and e-mail of the account), or the operator on the server's machine
// ("server": herald admin, an upgrade), who has no account; never null,
// so that every act says who made it.
type auditByJSON struct {
	Type  string `json:"type"`
	ID    uint64 `json:"id,omitempty"`
	Email string `json:"email,omitempty"`
}

// auditActorJSON is an account an act concerns, the owner of a message.
type auditActorJSON struct {
	ID    uint64 `json:"id"`
	Email string `json:"email"`
}

// auditTargetJSON is what an act was made on: an account ("user"), a
// message (with its owner) or an invitation.
type auditTargetJSON struct {
	Type  string          `json:"type"`
	ID    uint64          `json:"id"`
	Email string          `json:"email,omitempty"`
	Owner *auditActorJSON `json:"owner,omitempty"`
}

func newAuditJSON(e *model.AuditEntry) auditJSON {
	out := auditJSON{ID: e.ID, At: apiTime(e.At), Action: string(e.Action)}
	out.Actor = auditByJSON{Type: "server"}
	if e.ActorID != 0 {
		out.Actor = auditByJSON{Type: "user", ID: e.ActorID, Email: e.ActorEmail}
	}
	switch {
	case e.MessageID != 0:
		out.Target = &auditTargetJSON{Type: "message", ID: e.MessageID, Owner: &auditActorJSON{ID: e.UserID, Email: e.UserEmail}}
	case e.InviteID != 0:
		out.Target = &auditTargetJSON{Type: "invite", ID: e.InviteID}
	case e.UserID != 0:
		out.Target = &auditTargetJSON{Type: "user", ID: e.UserID, Email: e.UserEmail}
	}
	if e.Action == model.AuditDeleteMessages {
		out.Count = &e.Count
	}
	if e.Action == model.AuditUpdateSettings {
		out.Settings = e.Settings
	}
	return out
}

type auditPageJSON struct {
	Items []auditJSON `json:"items"`
	Next  *string     `json:"next"`
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
