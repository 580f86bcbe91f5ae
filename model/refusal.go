package model

import (
	"fmt"
	"time"
)

// Refusals: the sentences a client reads when a store says no, each
// written here once, for both stores and the HTTP layer. The agreement
// test holds the two stores to the same answers; a sentence they share
// is one function, so they cannot drift apart.

// Accounts.

// AccountNotFound refuses an act on account id, which does not exist.
func AccountNotFound(id uint64) error {
	return Errorf(ErrNotFound, "account %d does not exist", id)
}

// EmailNotFound refuses a lookup of an e-mail no account has.
func EmailNotFound() error {
	return Errorf(ErrNotFound, "no account has this e-mail")
}

// AccountGone refuses an act whose own account was deleted while the
// act waited for it.
func AccountGone() error {
	return Errorf(ErrUnauthorized, "the account no longer exists")
}

// AccountNeeded refuses an account's act to a caller who has none
// (ByServer).
func AccountNeeded() error {
	return Errorf(ErrUnauthorized, "this needs an account")
}

// EmailTaken is the refusal of an account whose e-mail another account
// has, in any letter case (the same EmailKey).
func EmailTaken(email string) error {
	return Errorf(ErrConflict, "the e-mail %s is already registered", email)
}

// EmailLookAlike is the refusal of an account whose e-mail looks like
// another account's (the same EmailSkeleton): shown beside a message, one
// could pass for the other.
func EmailLookAlike(email string) error {
	return Errorf(ErrConflict, "the e-mail %s looks like the address of an existing account (the same letters drawn alike); register with another address", email)
}

// HandleTaken is the refusal of a handle another account has.
func HandleTaken(handle string) error {
	return &Error{Kind: ErrConflict, Field: "handle", Detail: fmt.Sprintf("the handle %s is taken; choose another", handle)}
}

// HandleNotFound refuses a lookup of a handle no account has.
func HandleNotFound() error {
	return Errorf(ErrNotFound, "no account has this handle")
}

// Logins and tokens.

// BadCredentials refuses a login with an unknown e-mail or the wrong
// password: one sentence for both, so the answer does not tell which
// accounts exist.
func BadCredentials() error {
	return Errorf(ErrUnauthorized, "e-mail or password is incorrect")
}

// AccountSuspended refuses a login to a suspended account.
func AccountSuspended() error {
	return Errorf(ErrForbidden, "this account is suspended; an administrator can lift the suspension")
}

// TokenUnknown refuses a bearer token that was never issued or was
// revoked.
func TokenUnknown() error {
	return Errorf(ErrUnauthorized, "the bearer token is unknown or was revoked")
}

// TokenExpired refuses a bearer token past its expiry.
func TokenExpired() error {
	return Errorf(ErrUnauthorized, "the bearer token has expired; log in again")
}

// TokenAccountGone refuses a bearer token whose account was deleted.
func TokenAccountGone() error {
	return Errorf(ErrUnauthorized, "the bearer token's account no longer exists")
}

// TokenAccountSuspended refuses a bearer token of a suspended account.
func TokenAccountSuspended() error {
	return Errorf(ErrUnauthorized, "the bearer token's account is suspended")
}

// TokenNotFound refuses the revocation of a token that does not exist
// (a logout that another got to first).
func TokenNotFound() error {
	return Errorf(ErrNotFound, "the token does not exist")
}

// TokenNotHeld refuses an act on the token whose public ID is id, which
// the caller does not hold: someone else's token is as unknown as one
// never issued.
func TokenNotHeld(id string) error {
	return Errorf(ErrNotFound, "you hold no token %s", id)
}

// TokenAlreadyIssued refuses a token whose hash another token has.
func TokenAlreadyIssued() error {
	return Errorf(ErrConflict, "this token was already issued")
}

// Messages.

// MessageNotFound refuses an act on message id, which does not exist
// (or whose owner's account is being deleted).
func MessageNotFound(id uint64) error {
	return Errorf(ErrNotFound, "message %d does not exist", id)
}

// MessageChanged refuses a write to message id whose If-Match names a
// version it no longer has.
func MessageChanged(id uint64) error {
	return Errorf(ErrPrecondition, "message %d has changed since the version in If-Match; fetch it again for its current ETag", id)
}

// TooManyTerms refuses a search with more than MaxQueryTerms distinct
// words.
func TooManyTerms() error {
	var v ValidationError
	v.Add("q", fmt.Sprintf("must have at most %d distinct words", MaxQueryTerms))
	return &v
}

// Administration.

// AdministratorNeeded refuses an administrative act to a caller who
// cannot administer.
func AdministratorNeeded() error {
	return Errorf(ErrForbidden, "this needs an administrator")
}

// LastAdministrator refuses to let u, the last account able to
// administer, be what (deleted, suspended, stripped of the role).
func LastAdministrator(u *User, what string) error {
	return Errorf(ErrConflict, "%s is the last administrator and cannot be %s; make another account an administrator first", u.Email, what)
}

// Invitations and password resets.

// InviteNotFound refuses an act on invitation id, which does not exist.
func InviteNotFound(id uint64) error {
	return Errorf(ErrNotFound, "invitation %d does not exist", id)
}

// InviteCodeAlreadyIssued refuses an invitation whose code's hash another
// invitation has.
func InviteCodeAlreadyIssued() error {
	return Errorf(ErrConflict, "this invitation code was already issued")
}

// InviteRefused is the one answer to a registration whose invitation is
// unknown, used up, revoked or expired: which of them is nobody's business
// but the administrator's.
func InviteRefused() error {
	var v ValidationError
	v.Add("invite", "is not a valid invitation: it is unknown, used up, revoked or expired")
	return &v
}

// ResetCodeAlreadyIssued refuses a password reset whose code's hash
// another reset has.
func ResetCodeAlreadyIssued() error {
	return Errorf(ErrConflict, "this password-reset code was already issued")
}

// ResetCodeRefused is the one answer to a password reset whose code is
// unknown, used or expired.
func ResetCodeRefused() error {
	var v ValidationError
	v.Add("code", "is not a valid password-reset code: it is unknown, used or expired; ask an administrator for a new one")
	return &v
}

// Idempotency.

// KeyReused refuses a create whose Idempotency-Key came, within
// IdempotencyWindow, with another request.
func KeyReused() error {
	return &Error{Kind: ErrKeyReused, Detail: "this Idempotency-Key came within the last 24 hours with another request;" +
		" a retry must repeat its request exactly, and a new request needs a new key"}
}

// Storage faults: the storage could not do what was asked, through no
// fault of the caller's. Each says when to try again (retry); those with a
// cause keep it for the log, never for the client.

// WritesNotCompleting refuses a write still queued when its time ran
// out: the writes before it had not finished, and it was never run.
func WritesNotCompleting(retry time.Duration) error {
	return &Error{Kind: ErrUnavailable, RetryAfter: retry,
		Detail: "the database is not completing writes in time; nothing was written; try again shortly"}
}

// CommitOverdue answers a write whose commit had begun and not ended when
// its time ran out: it may or may not be done.
func CommitOverdue(retry time.Duration) error {
	return &Error{Kind: ErrOutcomeUnknown, RetryAfter: retry,
		Detail: "the commit of the write did not end in time"}
}

// WriteUnconfirmed answers a write whose commit was sent to the database
// and whose answer never came, for cause: it may or may not be done.
func WriteUnconfirmed(cause error, retry time.Duration) error {
	return &Error{Kind: ErrOutcomeUnknown, RetryAfter: retry, Cause: cause,
		Detail: "the database did not confirm the write, which may or may not have been done"}
}

// DatabaseNotAnswering refuses a call the database did not answer in time.
func DatabaseNotAnswering(cause error, retry time.Duration) error {
	return &Error{Kind: ErrUnavailable, RetryAfter: retry, Cause: cause,
		Detail: "the database did not answer in time; try again shortly"}
}

// DatabaseUnreachable refuses a call while the database cannot be reached.
func DatabaseUnreachable(cause error, retry time.Duration) error {
	return &Error{Kind: ErrUnavailable, RetryAfter: retry, Cause: cause,
		Detail: "the database cannot be reached now; try again shortly"}
}

// StorageFull refuses a write the server's own storage had no room for
// (the bbolt store's file).
func StorageFull() error {
	return &Error{Kind: ErrNoSpace, Detail: "the server is out of storage, so the write was not kept; try again later"}
}

// DatabaseFull refuses a write the database server had no room for; its
// reads go on.
func DatabaseFull() error {
	return Errorf(ErrNoSpace, "the database server is out of storage; reads go on, and writes succeed again once space is freed")
}

// Certificates (HTTPS with ACME): read by the server, never by a client.

// CertNotStored says nothing is stored under a certificate value's name.
func CertNotStored(name string) error {
	return Errorf(ErrNotFound, "no certificate value is stored as %q", name)
}

// MailNotConfigured refuses what needs e-mail on a server that sends
// none.
func MailNotConfigured() error {
	return Errorf(ErrNotFound, "this server sends no e-mail, so it cannot send a password-reset link; ask an administrator for one")
}
