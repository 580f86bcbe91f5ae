package http

import (
	"errors"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"herald/auth"
	"herald/model"
)

var passwordResetFields = fieldSpec{writable: []string{"code", "newPassword"}}

// resetPassword answers POST /api/password-reset: the holder of a code an
// administrator made sets a new password, and every token of the account
// stops working. A bad code counts like a failed login against the
// client's address.
func (s *Server) resetPassword(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	f, err := decodeBody(w, r, s.maxBody, passwordResetFields)
	if err != nil {
		return err
	}
	code, next := f.str("code"), f.str("newPassword")
	var v model.ValidationError
	if code == "" {
		v.Add("code", "must not be blank")
	}
	v.CheckNewPassword("newPassword", next)
	if err := v.Err(); err != nil {
		return err
	}
	attempt, err := s.guard.startCodeAttempt(r)
	if err != nil {
		return err
	}
	if !auth.WellFormedCode(auth.ResetPrefix, code) {
		return model.ResetCodeRefused()
	}
	hash := model.TokenHash(auth.HashToken(code))
	// The code first: a bad one must not cost a password's hashing.
	if _, err := s.store.PasswordReset(r.Context(), hash); err != nil {
		if !errors.Is(err, model.ErrInvalid) {
			attempt.uncounted()
		}
		return err
	}
	attempt.uncounted()
	passwordHash, err := s.hasher.Hash(r.Context(), next)
	if err != nil {
		return err
	}
	if err := s.store.ResetPassword(r.Context(), hash, passwordHash); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
