package pg

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"herald/model"
)

// Faults. PostgreSQL failing under a call — no connection to be had, one
// lost, the server shutting down, crashing or restarting, or no answer
// within the call's deadline — is sorted here, where the store's calls
// end (call), into one of two kinds by what had been sent:
//
//   - model.ErrUnavailable (503 with Retry-After): nothing had been sent
//     that could commit. A write transaction's statements before its
//     COMMIT cannot: PostgreSQL rolls back a transaction whose connection
//     is gone, or whose backend is. Reads never commit anything.
//   - model.ErrOutcomeUnknown: the COMMIT, or a statement that commits by
//     itself (a create), had been sent and its answer never came. The
//     write may be durable, its answer lost; sent again, it could be
//     stored twice, so the client is told to look before it retries.
//
// The point of no return is marked where such a statement is sent
// (sentCommit), and everything else is decided here. pgx returns a
// connection's read failures as they come, an io.ErrUnexpectedEOF or a
// *net.OpError for a reset, not wrapped in an error of its own; so
// nothing but where an error was met says it is the database's, and
// inside this package, which reads from nothing else, every such error
// is.

// DefaultTimeout is the deadline of a call's database work when
// Options.Timeout does not say: far above what any of Herald's statements
// takes on a database that answers (milliseconds; a costly search is
// bounded by its windows), and below the minute after which clients and
// proxies give up on their own.
const DefaultTimeout = 10 * time.Second

// retryAfter is the Retry-After of a call refused because PostgreSQL is
// out of reach or not answering: a restart or a failover takes seconds.
const retryAfter = 2 * time.Second

// cancelGrace is how long a call whose deadline passed waits for
// PostgreSQL to answer the cancel request pgx sends then (the statement
// ends, rolled back, and the connection stays usable) before the
// connection is closed: a server that answers nothing at all answers no
// cancel request either.
const cancelGrace = time.Second

// call bounds the database work of a call of the store's by the store's
// deadline, and sorts the error it returns (classify) when it ends:
//
//	func (db *DB) X(ctx context.Context, ...) (_ T, err error) {
//		ctx, end := db.call(ctx, &err)
//		defer end()
//
// A caller that left (its context cancelled, not out of time) gets its
// context's error, whatever the cancelled statement came back with.
func (db *DB) call(ctx context.Context, errp *error) (context.Context, func()) {
	bounded, cancel := context.WithTimeout(ctx, db.timeout)
	return bounded, func() {
		cancel()
		err := *errp
		if err == nil {
			return
		}
		var known *model.Error
		if errors.Is(ctx.Err(), context.Canceled) && !errors.As(err, &known) {
			*errp = ctx.Err()
			return
		}
		*errp = classify(err)
	}
}

// inDoubt is an error met after a statement that could commit was sent,
// before its answer came.
type inDoubt struct{ err error }

func (e *inDoubt) Error() string { return e.err.Error() }
func (e *inDoubt) Unwrap() error { return e.err }

// sentCommit returns err, met after sending a statement that could
// commit, marked as leaving the write in doubt, unless it proves nothing
// was committed (rolledBack).
func sentCommit(err error) error {
	if err == nil || rolledBack(err) {
		return err
	}
	return &inDoubt{err}
}

// rolledBack reports whether a transaction whose statement failed with
// err certainly committed nothing: nothing was sent, or PostgreSQL
// answered the statement with an error, which ends the transaction
// before any commit. An error of severity FATAL or PANIC proves nothing:
// a backend told to quit at once (a crash of another backend, an
// immediate shutdown) sends one and exits wherever it is, after a commit
// as well as before.
func rolledBack(err error) bool {
	if pgconn.SafeToRetry(err) {
		return true
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	severity := pe.SeverityUnlocalized
	if severity == "" {
		severity = pe.Severity
	}
	return severity != "FATAL" && severity != "PANIC"
}

// classify returns err as the store's callers should see it: PostgreSQL
// out of reach, or not answering in time, as an error of kind
// model.ErrUnavailable, or model.ErrOutcomeUnknown when a commit had been
// sent (sentCommit); any other error as it is. Both carry err as their
// cause, for the log.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var known *model.Error
	if errors.As(err, &known) || errors.Is(err, context.Canceled) {
		return err
	}
	late := errors.Is(err, context.DeadlineExceeded) || queryCanceled(err)
	if !late && !lost(err) {
		return err
	}
	var doubt *inDoubt
	switch {
	case errors.As(err, &doubt):
		return model.WriteUnconfirmed(err, retryAfter)
	case late:
		return model.DatabaseNotAnswering(err, retryAfter)
	}
	return model.DatabaseUnreachable(err, retryAfter)
}

// queryCanceled reports whether PostgreSQL cancelled the statement: at
// the request pgx sends when a call's deadline passes, or at an
// operator's, or by a statement_timeout.
func queryCanceled(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57014"
}

// lost reports whether err says PostgreSQL cannot serve now:
//   - no connection could be made (the server is down, restarting, or
//     refuses this instance: a wrong password, no room), whatever the
//     server said;
//   - a connection broke: an early end, a reset, a write that failed;
//   - the server says so: connection failures (class 08), a shutdown, a
//     crash or a restart (class 57P), too many connections (53300), or a
//     standby that cannot take writes (25006).
func lost(err error) bool {
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") ||
			pe.Code == "53300" || pe.Code == "25006"
	}
	var network net.Error
	return errors.As(err, &network) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed)
}
