package http

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"herald/auth"
	"herald/model"
)

// infoJSON is what a client may know of the server before signing in.
type infoJSON struct {
	Registration Registration `json:"registration"`
	// PasswordResetByEmail says whether a person who forgot their
	// password may ask for a link by e-mail.
	PasswordResetByEmail bool   `json:"passwordResetByEmail"`
	Version              string `json:"version,omitempty"`
}

// info answers GET /api/info: the registration mode, so clients show the
// right form, and for an administrator's token the running version too.
// A token that does not work is no error here: the answer is simply the
// public one.
func (s *Server) info(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	out := infoJSON{Registration: s.Registration(), PasswordResetByEmail: s.mailer != nil}
	if token, ok := bearerToken(r.Header.Get("Authorization")); ok && auth.WellFormedToken(token) {
		u, _, err := s.store.Authenticate(r.Context(), model.TokenHash(auth.HashToken(token)))
		if err == nil && u.HasRole(model.RoleAdmin) {
			out.Version = s.version
			noteCaller(r, u)
		}
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}
