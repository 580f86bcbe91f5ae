package http

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"herald/auth"
	"herald/model"
)

var (
	registerFields = fieldSpec{
		writable: []string{"email", "password", "invite", "handle", "name"},
		readOnly: []string{"id", "roles", "createdAt", "token", "expiresAt"},
	}
	profileFields = fieldSpec{
		writable:   []string{"handle", "name"},
		readOnly:   []string{"id", "email", "roles", "createdAt"},
		mergePatch: true,
	}
	loginFields = fieldSpec{writable: []string{"username", "password"}}
)

// Registration says who may register.
type Registration string

// The registration modes.
const (
	RegistrationOpen   Registration = "open"   // anyone
	RegistrationInvite Registration = "invite" // whoever holds an invitation
	RegistrationClosed Registration = "closed" // nobody
)

// ParseRegistration reads a registration mode by its name.
func ParseRegistration(s string) (Registration, error) {
	switch m := Registration(s); m {
	case RegistrationOpen, RegistrationInvite, RegistrationClosed:
		return m, nil
	}
	return "", fmt.Errorf("%q is not a registration mode: say open, invite or closed", s)
}

// Registration is the registration mode in force: the database's
// setting, or the flag's.
func (s *Server) Registration() Registration { return s.settings.live.Load().registration }

// registerAccount creates an account and hands out its first token. While
// registration needs an invitation, the invitation is checked, and one of
// its uses taken, in the account's own transaction; a bad one counts like
// a failed login against the client's address.
func (s *Server) registerAccount(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	f, err := decodeBody(w, r, s.maxBody, registerFields)
	if err != nil {
		return err
	}
	mode, code := s.Registration(), f.str("invite")
	switch {
	case mode == RegistrationClosed:
		return errRegistrationClosed
	case mode == RegistrationInvite && code == "":
		return errInvitationNeeded
	}
	_, nameSent := f["name"]
	reg := model.Registration{Email: f.str("email"), Password: f.str("password"), Handle: f.str("handle"), Name: f.str("name"), NameSent: nameSent}
	reg.Normalize()
	if err := reg.Validate(); err != nil {
		return err
	}
	if err := s.guard.startRegistration(r); err != nil {
		return err
	}
	var invite *model.TokenHash
	var attempt *loginAttempt
	if mode == RegistrationInvite {
		if attempt, err = s.guard.startCodeAttempt(r); err != nil {
			return err
		}
		if !auth.WellFormedCode(auth.InvitePrefix, code) {
			return model.InviteRefused()
		}
		hash := model.TokenHash(auth.HashToken(code))
		invite = &hash
	}
	u, token, tok, err := s.createAccount(r, reg, invite)
	if attempt != nil && !errors.Is(err, model.ErrInvalid) {
		attempt.uncounted() // the invitation was good, or never checked
	}
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusCreated, registeredJSON{
		userJSON:  newUserJSON(u),
		Token:     token,
		ExpiresAt: apiTime(tok.ExpiresAt),
	})
	return nil
}

// createAccount hashes the password and stores the account with its
// first token, taking a use of invite if it is not nil. It returns the
// account, the token and what the store keeps of it.
func (s *Server) createAccount(r *http.Request, reg model.Registration, invite *model.TokenHash) (*model.User, string, *model.Token, error) {
	hash, err := s.hasher.Hash(r.Context(), reg.Password)
	if err != nil {
		return nil, "", nil, err
	}
	token, tokenHash, err := auth.MintToken()
	if err != nil {
		return nil, "", nil, err
	}
	u := &model.User{Email: reg.Email, Handle: reg.Handle, Name: reg.Name, PasswordHash: hash}
	tok, err := s.store.CreateUser(r.Context(), u, tokenHash, s.tokenTTL, invite)
	if err != nil {
		return nil, "", nil, err
	}
	return u, token, tok, nil
}

// login checks credentials and issues a new token: one per login, so each
// device holds its own and logging out of one leaves the others working.
func (s *Server) login(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	f, err := decodeBody(w, r, s.maxBody, loginFields)
	if err != nil {
		return err
	}
	username, password := model.NormalizeEmail(f.str("username")), f.str("password")
	var missing model.ValidationError
	if username == "" {
		missing.Add("username", "must not be blank")
	}
	if password == "" {
		missing.Add("password", "must not be blank")
	}
	if err := missing.Err(); err != nil {
		return err
	}
	u, err := s.checkCredentials(r, username, password)
	if err == nil && u.Suspended {
		// The right password: say why it does not let the account in.
		err = model.AccountSuspended()
	}
	if err != nil {
		s.countLogin(loginOutcome(err))
		return err
	}
	s.countLogin("ok")
	token, tokenHash, err := auth.MintToken()
	if err != nil {
		return err
	}
	tok, err := s.store.IssueLoginToken(r.Context(), u.ID, u.PasswordHash, tokenHash, s.tokenTTL)
	if errors.Is(err, model.ErrForbidden) {
		return model.AccountSuspended() // suspended while the password was checked
	}
	if errors.Is(err, model.ErrUnauthorized) {
		return badCredentials() // the password changed, or the account went, while it was checked
	}
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, tokenJSON{Token: token, ExpiresAt: apiTime(tok.ExpiresAt)})
	return nil
}

// checkCredentials returns the user whose e-mail and password these are.
// Unknown e-mails cost the same argon2 work as wrong passwords, and both
// get the same error, so neither the answer nor its timing tells them apart.
func (s *Server) checkCredentials(r *http.Request, email, password string) (*model.User, error) {
	attempt, err := s.guard.startLogin(r, email)
	if err != nil {
		return nil, err
	}
	if len(password) > model.MaxPasswordBytes {
		// No stored password can be this long; refuse before hashing so a
		// huge password cannot buy a long computation. It still counts as
		// a failed try.
		return nil, badCredentials()
	}
	u, err := s.store.UserByEmail(r.Context(), email)
	if errors.Is(err, model.ErrNotFound) {
		// Unknown e-mails cost the same hashing and the same tries as
		// wrong passwords.
		if err := s.hasher.VerifyDummy(r.Context(), password); err != nil {
			attempt.uncounted()
			return nil, err
		}
		return nil, badCredentials()
	}
	if err != nil {
		attempt.uncounted()
		return nil, err
	}
	ok, stale, err := s.hasher.Verify(r.Context(), password, u.PasswordHash)
	if err != nil {
		attempt.uncounted()
		return nil, err
	}
	if !ok {
		return nil, badCredentials()
	}
	attempt.uncounted()
	if stale {
		s.rehash(r, u, password)
	}
	return u, nil
}

// rehash stores the password under the current hashing parameters. Failure
// is logged, not returned: the login itself succeeded.
func (s *Server) rehash(r *http.Request, u *model.User, password string) {
	hash, err := s.hasher.Hash(r.Context(), password)
	if err == nil {
		err = s.store.SetPasswordHash(r.Context(), u.ID, u.PasswordHash, hash)
	}
	if err != nil {
		s.log.WarnContext(r.Context(), "upgrading password hash", "user", u.ID, "err", err)
		return
	}
	// The login goes on with the hash now stored (if a password change
	// got there first, issuing the token will notice).
	u.PasswordHash = hash
}

// me returns the caller's account.
func (s *Server) me(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	s.writeJSON(w, r, http.StatusOK, newUserJSON(caller(r).user))
	return nil
}

// updateProfile changes the caller's handle and name.
func (s *Server) updateProfile(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	f, err := decodeBody(w, r, s.maxBody, profileFields)
	if err != nil {
		return err
	}
	var p model.ProfileUpdate
	var v model.ValidationError
	for _, field := range []struct {
		name string
		to   **string
	}{{"handle", &p.Handle}, {"name", &p.Name}} {
		if value, sent := f[field.name]; sent {
			if value == nil {
				v.Add(field.name, "cannot be removed")
			}
			*field.to = value
		}
	}
	if err := v.Err(); err != nil {
		return err
	}
	u, err := s.store.UpdateProfile(r.Context(), model.ByToken(caller(r).tokenHash), p)
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, newUserJSON(u))
	return nil
}

// profile answers an account's public profile by its handle.
func (s *Server) profile(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	u, err := s.store.UserByHandle(r.Context(), ps.ByName("handle"))
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, profileJSON{ID: u.ID, Handle: u.Handle, Name: u.Name, CreatedAt: apiTime(u.CreatedAt)})
	return nil
}

// logout revokes the token the request was made with; the caller's other
// tokens keep working.
func (s *Server) logout(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	err := s.store.RevokeToken(r.Context(), caller(r).tokenHash)
	if errors.Is(err, model.ErrNotFound) {
		// A concurrent logout with the same token got there first.
		err = &model.Error{Kind: model.ErrUnauthorized, Detail: "the bearer token was already revoked"}
	}
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// loginOutcome names a failed login for the metrics.
func loginOutcome(err error) string {
	var reqErr *requestError
	switch {
	case errors.Is(err, auth.ErrBusy):
		return "busy"
	case errors.As(err, &reqErr) && reqErr.status == http.StatusTooManyRequests:
		return "limited"
	case errors.As(err, &reqErr) && reqErr.status == http.StatusUnauthorized:
		return "failed"
	}
	return "error"
}
