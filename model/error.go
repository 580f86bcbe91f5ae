package model

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Error kinds. A store refuses with one of the refusals of refusal.go: an
// *Error of one of these kinds with a sentence safe to show a client. The
// HTTP layer maps kinds to status codes with errors.Is. Anything not
// wrapping a kind is an internal error and must never be shown.
var (
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the write would break a uniqueness rule.
	ErrConflict = errors.New("conflict")
	// ErrForbidden: the caller is known but may not touch the record.
	ErrForbidden = errors.New("forbidden")
	// ErrUnauthorized: the presented credential is unknown, expired or revoked.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrPrecondition: the caller's precondition (If-Match) does not hold.
	ErrPrecondition = errors.New("precondition failed")
	// ErrInvalid: the input breaks a field rule; see ValidationError.
	ErrInvalid = errors.New("invalid")
	// ErrLimited: the caller has spent a limit (live streams, say); an
	// *Error of this kind says in RetryAfter when to try again.
	ErrLimited = errors.New("limited")
	// ErrUnavailable: the service cannot do this now (it is shutting
	// down, say, or its database is out of reach or not answering),
	// through no fault of the caller's. Nothing of the request was done.
	ErrUnavailable = errors.New("unavailable")
	// ErrOutcomeUnknown: a write went to the storage and its answer never
	// came (the connection was lost, or the time ran out, after the
	// statement or the commit that could make it durable was sent): it
	// may or may not have been done, and only a later read can tell.
	ErrOutcomeUnknown = errors.New("write outcome unknown")
	// ErrNoSpace: a write failed because the storage is full. Nothing of
	// it was kept; the same write succeeds once space is freed.
	ErrNoSpace = errors.New("out of storage")
	// ErrKeyReused: an Idempotency-Key came back with another request
	// than the one it first came with (see IdempotencyRecord).
	ErrKeyReused = errors.New("idempotency key reused")
)

// Violation names one field and what is wrong with it.
type Violation struct {
	Field   string
	Message string
}

// ValidationError lists every field rule the input breaks, so a client can
// fix all of them in one round trip. It matches ErrInvalid with errors.Is.
type ValidationError struct {
	Violations []Violation
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.Field + ": " + v.Message
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// Is makes errors.Is(err, ErrInvalid) true for every ValidationError.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Add records a violation; it keeps validation code flat.
func (e *ValidationError) Add(field, message string) {
	e.Violations = append(e.Violations, Violation{Field: field, Message: message})
}

// Err returns e as an error only when it holds violations, avoiding the
// typed-nil-in-interface trap at every call site.
func (e *ValidationError) Err() error {
	if len(e.Violations) == 0 {
		return nil
	}
	return e
}

// Error is a refusal a client may be told about: its kind (ErrNotFound,
// ErrConflict, ...) and a sentence written for the client, such as
// "message 7 does not exist". errors.Is matches the kind; the HTTP layer
// shows Detail as it is, so Detail never holds internals.
type Error struct {
	Kind   error
	Detail string
	// RetryAfter, when positive, is how long the caller should wait before
	// trying again (ErrLimited, ErrUnavailable, ErrOutcomeUnknown).
	RetryAfter time.Duration
	// Cause, when set, is the failure behind the refusal (a connection
	// reset, say), for the log: Error includes it, Detail never does.
	Cause error
	// Field, when set, is the request's field the refusal is about (a
	// taken handle), so a client can show the refusal beside it.
	Field string
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Detail + ": " + e.Cause.Error()
	}
	return e.Detail
}

// Unwrap makes errors.Is(err, e.Kind) true, and errors.Is and errors.As
// reach the cause.
func (e *Error) Unwrap() []error {
	if e.Cause != nil {
		return []error{e.Kind, e.Cause}
	}
	return []error{e.Kind}
}

// Errorf returns an *Error of kind with a detail built like fmt.Sprintf.
func Errorf(kind error, format string, args ...any) error {
	return &Error{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}
