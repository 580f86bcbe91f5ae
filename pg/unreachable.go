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

// unreachableRetry is the Retry-After of a request refused because
// PostgreSQL is out of reach: a restart takes seconds.
const unreachableRetry = 2 * time.Second

// Unreachable returns err as an error of kind model.ErrUnavailable when it
// means PostgreSQL cannot serve now, whatever call met it, and nil
// otherwise:
//   - no connection could be made (the server is down, restarting, or
//     refuses this instance: wrong password, no room);
//   - a connection broke mid-request (the server was stopped, or the
//     network between them failed);
//   - the server says so: connection failures (class 08), an operator's
//     shutdown or a restart (class 57P), too many connections (53300), or
//     a standby that cannot take writes (25006).
//
// A client that left, or a request out of time, is not the database's
// doing and is left to the caller.
func (db *DB) Unreachable(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || !unreachable(err) {
		return nil
	}
	return &model.Error{Kind: model.ErrUnavailable, RetryAfter: unreachableRetry,
		Detail: "the database cannot be reached now; try again shortly"}
}

func unreachable(err error) bool {
	// Whatever made a connection fail: the server's refusal (a PgError
	// inside it: a wrong password, no room) or the attempt out of its own
	// time (Options.ConnectTimeout).
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return false // the request out of its time: the caller's
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") ||
			pe.Code == "53300" || pe.Code == "25006"
	}
	// A broken connection's error is pgconn's, which says whether the
	// statement was sent; a network error or an early EOF from elsewhere
	// (a client's request body cut short) is not the database's.
	var fromPgconn interface{ SafeToRetry() bool }
	if !errors.As(err, &fromPgconn) {
		return false
	}
	var network net.Error
	return fromPgconn.SafeToRetry() || errors.As(err, &network) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
