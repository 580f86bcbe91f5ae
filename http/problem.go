package http

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"herald/auth"
	"herald/model"
)

// This file is the only one that knows HTTP status codes. Handlers return
// errors; writeError turns them into RFC 9457 problem documents.

// problemContentType is the media type of every error body.
const problemContentType = "application/problem+json"

// problem is an RFC 9457 problem document.
type problem struct {
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Status     int         `json:"status"`
	Detail     string      `json:"detail,omitempty"`
	Violations []violation `json:"violations,omitempty"`
}

type violation struct {
	PropertyPath string `json:"propertyPath"`
	Message      string `json:"message"`
}

// requestError is a client mistake found in the HTTP layer, before storage
// is involved. Its message is written for the client and is safe to show.
type requestError struct {
	status int
	msg    string
	field  string // the offending field or parameter, if any
	header http.Header
}

func (e *requestError) Error() string { return e.msg }

// badRequest: malformed syntax, a bad parameter, an unknown or read-only
// field. field names the culprit, "" when there is none.
func badRequest(field, format string, args ...any) error {
	return &requestError{status: http.StatusBadRequest, field: field, msg: fmt.Sprintf(format, args...)}
}

// malformedQuery: a query string that cannot be read as one.
func malformedQuery() error { return badRequest("", "query string is malformed") }

// repeatedField: a field a request body gives more than once.
func repeatedField(name string) error {
	return badRequest(name, "field %q is given more than once", name)
}

// badMultipart: a body sent as multipart/form-data that is not.
func badMultipart() error { return badRequest("", "request body is not valid multipart/form-data") }

// badLimit: a page size that is not a whole number from 1 to maxLimit.
func badLimit(maxLimit int) error {
	return badRequest("limit", "limit must be an integer from 1 to %d", maxLimit)
}

// foreignCursor: a cursor that no listing of this server gave out.
func foreignCursor() error {
	return badRequest("cursor", "cursor is not one this server issued; use the next value of a previous page")
}

func unsupportedMediaType(format string, args ...any) error {
	return &requestError{status: http.StatusUnsupportedMediaType, msg: fmt.Sprintf(format, args...)}
}

func bodyTooLarge(limit int64) error {
	return &requestError{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("request body is larger than %d bytes", limit)}
}

func routeNotFound(r *http.Request) error {
	return &requestError{status: http.StatusNotFound, msg: fmt.Sprintf("no such resource: %s", r.URL.Path)}
}

func methodNotAllowed(r *http.Request) error {
	return &requestError{status: http.StatusMethodNotAllowed, msg: fmt.Sprintf("method %s is not allowed on %s", r.Method, r.URL.Path)}
}

// bearerChallenge is the RFC 6750 WWW-Authenticate value for a request with
// no credentials at all.
const bearerChallenge = `Bearer realm="herald"`

// missingToken: a protected route was called without a bearer token.
func missingToken() error {
	return &requestError{
		status: http.StatusUnauthorized,
		msg:    "this operation requires a bearer token: send Authorization: Bearer <token>",
		header: http.Header{"Www-Authenticate": {bearerChallenge}},
	}
}

// badCredentials: login with an unknown e-mail or the wrong password
// (model.BadCredentials), challenged as a request without a token is.
func badCredentials() error {
	return &requestError{
		status: http.StatusUnauthorized,
		msg:    clientDetail(model.BadCredentials(), ""),
		header: http.Header{"Www-Authenticate": {bearerChallenge}},
	}
}

// wrongPassword: a password confirming a sensitive change is not the
// account's.
func wrongPassword() error {
	return &requestError{
		status: http.StatusUnauthorized,
		msg:    "the password is incorrect",
		header: http.Header{"Www-Authenticate": {bearerChallenge}},
	}
}

// tooManyRequests: a limit (guessing, streams) is spent; retry after wait.
func tooManyRequests(msg string, wait time.Duration) error {
	return &requestError{
		status: http.StatusTooManyRequests,
		msg:    msg,
		header: http.Header{"Retry-After": {retryAfterSeconds(wait)}},
	}
}

// retryAfterSeconds renders wait as Retry-After wants it: whole seconds,
// rounded up, at least one.
func retryAfterSeconds(wait time.Duration) string {
	return strconv.FormatInt(max(1, int64((wait+time.Second-1)/time.Second)), 10)
}

// missingRole: authenticated, but without the role an operation requires.
func missingRole(role string) error {
	return &requestError{status: http.StatusForbidden, msg: "this operation requires role " + role}
}

// errRegistrationClosed: nobody may register on this server.
var errRegistrationClosed = &requestError{status: http.StatusForbidden, msg: "registration is closed on this server"}

// errInvitationNeeded: registration needs an invitation, and none was
// sent.
var errInvitationNeeded = &requestError{status: http.StatusForbidden, field: "invite", msg: "registration on this server needs an invitation; ask an administrator for one"}

// errNoHotBackup: the store cannot copy itself while it serves; its own
// tools back it up.
var errNoHotBackup = &requestError{status: http.StatusNotImplemented, msg: "this server's database is backed up with the database's own tools, not through the API"}

// errUnavailable: the database cannot serve requests (health check). A
// database out of reach is mostly a matter of seconds (a restart, a
// failover), and every other answer then says when to try again.
var errUnavailable = &requestError{status: http.StatusServiceUnavailable, msg: "database is unavailable",
	header: http.Header{"Retry-After": {"2"}}}

// errNotAnswering: the database did not answer the health check in time
// (healthWait): it hangs, or is too busy to serve.
var errNotAnswering = &requestError{status: http.StatusServiceUnavailable, msg: "the database is not answering",
	header: http.Header{"Retry-After": {"2"}}}

// outcomeUnknownType is the problem type of a write whose outcome is
// unknown (model.ErrOutcomeUnknown): a reference to the API's own
// documentation, which every server serves and which describes it.
const outcomeUnknownType = "/api/docs#outcome-unknown"

// outcomeUnknownTitle is its title, the same for every occurrence.
const outcomeUnknownTitle = "Write Outcome Unknown"

// outcomeUnknownDetail is what a client is told of a write whose outcome
// is unknown, by every store.
const outcomeUnknownDetail = "the database did not confirm this write: it may or may not have been done. " +
	"Read what it would have changed before sending it again, or send it again with the same Idempotency-Key"

// problemFor maps err to a problem document and any headers it needs. Errors
// it does not recognise become a bare 500; their text never reaches the body.
func problemFor(err error) (problem, http.Header, bool) {
	var (
		reqErr   *requestError
		valErr   *model.ValidationError
		tooLarge *http.MaxBytesError
	)
	if errors.As(err, &tooLarge) {
		err = bodyTooLarge(tooLarge.Limit)
	}
	p := problem{Type: "about:blank"}
	var header http.Header
	switch {
	case errors.As(err, &reqErr):
		p.Status, p.Detail, header = reqErr.status, reqErr.msg, reqErr.header
		if reqErr.field != "" {
			p.Violations = []violation{{PropertyPath: reqErr.field, Message: reqErr.msg}}
		}
	case errors.As(err, &valErr):
		p.Status, p.Detail = http.StatusUnprocessableEntity, "the request has invalid fields"
		for _, v := range valErr.Violations {
			p.Violations = append(p.Violations, violation{PropertyPath: v.Field, Message: v.Message})
		}
	case errors.Is(err, model.ErrKeyReused):
		p.Status, p.Detail = http.StatusUnprocessableEntity, clientDetail(err, "this Idempotency-Key came with another request")
		p.Violations = []violation{{PropertyPath: idempotencyKeyHeader, Message: p.Detail}}
	case errors.Is(err, model.ErrUnauthorized):
		p.Status, p.Detail = http.StatusUnauthorized, clientDetail(err, "the bearer token is invalid, expired or revoked")
		header = http.Header{"Www-Authenticate": {bearerChallenge + `, error="invalid_token", error_description="The access token is invalid, expired or revoked"`}}
	case errors.Is(err, model.ErrNotFound):
		p.Status, p.Detail = http.StatusNotFound, clientDetail(err, "the resource does not exist")
	case errors.Is(err, model.ErrForbidden):
		p.Status, p.Detail = http.StatusForbidden, clientDetail(err, "you may not do this")
	case errors.Is(err, model.ErrConflict):
		p.Status, p.Detail = http.StatusConflict, clientDetail(err, "the request conflicts with what is stored")
	case errors.Is(err, model.ErrPrecondition):
		p.Status, p.Detail = http.StatusPreconditionFailed, clientDetail(err, "the resource has changed since the version in If-Match")
	case errors.Is(err, model.ErrLimited):
		p.Status, p.Detail = http.StatusTooManyRequests, clientDetail(err, "too many requests; try again later")
		header = retryAfterHeader(err)
	case errors.Is(err, model.ErrNoSpace):
		p.Status, p.Detail = http.StatusInsufficientStorage, clientDetail(err, "the server is out of storage; try again later")
	case errors.Is(err, model.ErrUnavailable):
		p.Status, p.Detail = http.StatusServiceUnavailable, clientDetail(err, "the server cannot do this now; try again later")
		header = retryAfterHeader(err)
	case errors.Is(err, model.ErrOutcomeUnknown):
		// 503: the database failed, for the moment, under the write; but
		// a problem of its own type, not about:blank, since retrying
		// blindly, as a 503 invites, could do the write twice.
		p.Type, p.Title = outcomeUnknownType, outcomeUnknownTitle
		p.Status, p.Detail = http.StatusServiceUnavailable, outcomeUnknownDetail
		header = retryAfterHeader(err)
		if header == nil {
			header = http.Header{"Retry-After": {"2"}}
		}
		return p, header, true
	case errors.Is(err, auth.ErrBusy):
		// Every hashing slot is taken and the queue is full: a burst of
		// logins; a second later the queue has moved.
		p.Status, p.Detail = http.StatusServiceUnavailable, "the server is busy checking passwords; try again in a moment"
		header = http.Header{"Retry-After": {"1"}}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The client left or the server is shutting down while the request
		// waited (for a hashing slot, say): not a fault of ours to log as one.
		p.Status, p.Detail = http.StatusServiceUnavailable, "the request was abandoned before it completed"
		header = http.Header{"Retry-After": {"1"}}
	default:
		p.Status, p.Detail = http.StatusInternalServerError, "Internal error"
		p.Title = http.StatusText(p.Status)
		return p, nil, false
	}
	var refusal *model.Error
	if errors.As(err, &refusal) && refusal.Field != "" && p.Violations == nil {
		p.Violations = []violation{{PropertyPath: refusal.Field, Message: p.Detail}}
	}
	p.Title = http.StatusText(p.Status)
	return p, header, true
}

// writeError writes err as a problem document. Unrecognised errors are logged
// with their full text and answered with a bare 500; a refusal caused by
// a failure underneath (the database out of reach, say), and every write
// whose outcome is unknown, are logged as warnings.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	p, header, known := problemFor(err)
	var refusal *model.Error
	switch {
	case !known:
		s.log.ErrorContext(r.Context(), "internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	case errors.As(err, &refusal) && (refusal.Cause != nil || errors.Is(err, model.ErrOutcomeUnknown)):
		s.log.WarnContext(r.Context(), "database failure", "method", r.Method, "path", r.URL.Path,
			"status", p.Status, "kind", refusal.Kind.Error(), "err", err)
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	body, err := marshal(p)
	if err != nil { // cannot happen: problem holds only strings and ints
		body = []byte(`{"type":"about:blank","title":"Internal Server Error","status":500}`)
	}
	writeBody(w, problemContentType, p.Status, body)
}

// retryAfterHeader is the Retry-After of a *model.Error that says when to
// try again; nil when it does not.
func retryAfterHeader(err error) http.Header {
	var e *model.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		return http.Header{"Retry-After": {retryAfterSeconds(e.RetryAfter)}}
	}
	return nil
}

// clientDetail is the sentence a *model.Error carries for the client, or
// fallback when err is a bare kind: never the text of an error chain, which
// may end in internals ("...: not found").
func clientDetail(err error, fallback string) string {
	var e *model.Error
	if errors.As(err, &e) && e.Detail != "" {
		return e.Detail
	}
	return fallback
}
