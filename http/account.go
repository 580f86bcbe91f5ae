package http

import (
	"net/http"

	"github.com/julienschmidt/httprouter"

	"herald/model"
)

// The account routes: a user's tokens (one per device), password change and
// account deletion. Every write here goes through model.ByToken, so the token
// is checked again inside the write's own transaction.

var (
	passwordChangeFields = fieldSpec{writable: []string{"currentPassword", "newPassword"}}
	accountDeleteFields  = fieldSpec{writable: []string{"password"}}
)

// tokenInfoJSON describes one token without its secret or hash.
type tokenInfoJSON struct {
	ID         string  `json:"id"`
	CreatedAt  apiTime `json:"createdAt"`
	LastUsedAt apiTime `json:"lastUsedAt"`
	ExpiresAt  apiTime `json:"expiresAt"`
	Current    bool    `json:"current"`
}

type tokenListJSON struct {
	Items []tokenInfoJSON `json:"items"`
}

// listTokens answers GET /api/me/tokens: the caller's working tokens, newest
// first, the one making the request marked current.
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	p := caller(r)
	toks, err := s.store.Tokens(r.Context(), p.user.ID)
	if err != nil {
		return err
	}
	out := tokenListJSON{Items: make([]tokenInfoJSON, len(toks))}
	for i, t := range toks {
		out.Items[i] = tokenInfoJSON{
			ID:         t.ID.String(),
			CreatedAt:  apiTime(t.CreatedAt),
			LastUsedAt: apiTime(t.LastUsedAt),
			ExpiresAt:  apiTime(t.ExpiresAt),
			Current:    t.Hash == p.tokenHash,
		}
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// revokeToken answers DELETE /api/me/tokens/{id}: that token stops working.
// A handle of someone else's token is as unknown as one never issued.
func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	id, ok := model.ParseTokenID(ps.ByName("id"))
	if !ok {
		return model.TokenNotHeld(ps.ByName("id"))
	}
	if err := s.store.RevokeTokenByID(r.Context(), model.ByToken(caller(r).tokenHash), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// revokeAllTokens answers DELETE /api/me/tokens: log out everywhere, this
// token included.
func (s *Server) revokeAllTokens(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if err := s.store.RevokeAllTokens(r.Context(), model.ByToken(caller(r).tokenHash)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// changePassword answers POST /api/me/password. The current password is
// checked like a login — a wrong one counts as a failed login for the
// guessing limits — and every other token of the user stops working.
func (s *Server) changePassword(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	f, err := decodeBody(w, r, s.maxBody, passwordChangeFields)
	if err != nil {
		return err
	}
	current, next := f.str("currentPassword"), f.str("newPassword")
	var v model.ValidationError
	if current == "" {
		v.Add("currentPassword", "must not be blank")
	}
	v.CheckNewPassword("newPassword", next)
	if err := v.Err(); err != nil {
		return err
	}
	if err := s.confirmPassword(r, current); err != nil {
		return err
	}
	hash, err := s.hasher.Hash(r.Context(), next)
	if err != nil {
		return err
	}
	if err := s.store.ChangePassword(r.Context(), model.ByToken(caller(r).tokenHash), hash); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// deleteAccount answers DELETE /api/me: with the password confirmed, the
// account, its tokens and its messages are gone.
func (s *Server) deleteAccount(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	f, err := decodeBody(w, r, s.maxBody, accountDeleteFields)
	if err != nil {
		return err
	}
	password := f.str("password")
	if password == "" {
		var v model.ValidationError
		v.Add("password", "must not be blank: deleting an account asks for its password")
		return v.Err()
	}
	if err := s.confirmPassword(r, password); err != nil {
		return err
	}
	if err := s.store.DeleteAccount(r.Context(), model.ByToken(caller(r).tokenHash)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// confirmPassword checks the caller's password before a sensitive change.
// It is guarded and counted like a login, so a stolen token cannot be used
// to guess the password.
func (s *Server) confirmPassword(r *http.Request, password string) error {
	u := caller(r).user
	attempt, err := s.guard.startLogin(r, u.Email)
	if err != nil {
		return err
	}
	ok := false
	if len(password) <= model.MaxPasswordBytes {
		if ok, _, err = s.hasher.Verify(r.Context(), password, u.PasswordHash); err != nil {
			attempt.uncounted() // never checked: busy, or the client left
			return err
		}
	}
	if !ok {
		return wrongPassword()
	}
	attempt.uncounted()
	return nil
}
