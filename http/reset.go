package http

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"herald/auth"
	"herald/mail"
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

// Mailer sends e-mail without making anyone wait: Send queues m and
// reports whether it was taken (mail.Sender).
type Mailer interface {
	Send(m mail.Message) bool
}

var resetRequestFields = fieldSpec{writable: []string{"email"}}

// resetRequestAnswer is the one answer to a request for a reset link,
// whether or not an account has the address.
type resetRequestAnswer struct {
	Message string `json:"message"`
}

const resetRequested = "If an account has this address, an e-mail with a link to choose a new password is on its way. The link works once, for 24 hours."

// maxResetsMailing bounds the reset links being made at once; a request
// beyond it is answered the same and sends nothing (its requester asks
// again).
const maxResetsMailing = 8

// requestPasswordReset answers POST /api/password-reset/request: a link
// to choose a new password goes by e-mail to the account with the
// address, if one has it. The answer is the same, and as quick, whether
// one does or not: finding the account, making its code and queueing the
// e-mail happen after the answer, on a goroutine of their own. Beyond
// the limits per address and per client address, the answer is still
// the same, and nothing is sent: the limits tell no one who exists.
func (s *Server) requestPasswordReset(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if s.mailer == nil {
		return model.MailNotConfigured()
	}
	f, err := decodeBody(w, r, s.maxBody, resetRequestFields)
	if err != nil {
		return err
	}
	email := strings.TrimSpace(f.str("email"))
	var v model.ValidationError
	v.CheckEmail("email", email)
	if err := v.Err(); err != nil {
		return err
	}
	if s.guard.spendResetRequest(r, email) {
		select {
		case s.resetsMailing <- struct{}{}:
			go func() {
				defer func() { <-s.resetsMailing }()
				s.mailReset(email)
			}()
		default:
			s.log.Warn("password-reset e-mail not sent: too many being made at once")
		}
	}
	s.writeJSON(w, r, http.StatusAccepted, resetRequestAnswer{resetRequested})
	return nil
}

// resetMailTimeout bounds finding the account and storing its code.
const resetMailTimeout = 30 * time.Second

// mailReset makes a reset code for the account with the address email,
// if one has it and is not suspended, and queues the e-mail with its
// link. What goes wrong is logged, never told to the requester.
func (s *Server) mailReset(email string) {
	ctx, cancel := context.WithTimeout(context.Background(), resetMailTimeout)
	defer cancel()
	u, err := s.store.UserByEmail(ctx, email)
	if err != nil {
		if !errors.Is(err, model.ErrNotFound) {
			s.log.Warn("password-reset e-mail not sent", "err", err)
		}
		return
	}
	if u.Suspended {
		return
	}
	code, hash, err := auth.MintCode(auth.ResetPrefix)
	if err != nil {
		s.log.Error("password-reset e-mail not sent", "err", err)
		return
	}
	reset, err := s.store.CreatePasswordReset(ctx, model.ByServer(), u.ID, hash, model.DefaultResetLifetime)
	if err != nil {
		s.log.Warn("password-reset e-mail not sent", "err", err)
		return
	}
	m, err := mail.PasswordReset(u.Email, s.instanceName(), s.public+"/#reset="+code, reset.ExpiresAt)
	if err != nil {
		s.log.Error("password-reset e-mail not sent", "err", err)
		return
	}
	s.mailer.Send(m)
}

// instanceName is what e-mails call this server: its public address's
// host.
func (s *Server) instanceName() string {
	if u, err := url.Parse(s.public); err == nil && u.Host != "" {
		return u.Host
	}
	return "Herald"
}
