package pg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"herald/model"
)

// TestClassify: what a call returns for each failure it may meet. pgx
// returns a connection's read failures unwrapped (an early EOF, a reset),
// and inside this package every such error is the database's: out of
// reach, unless a commit had been sent before, when the write's outcome
// is unknown. A PostgreSQL error that ends the statement proves the
// transaction rolled back; a FATAL one, sent by a backend told to quit
// wherever it is, does not. Errors of Herald's own rules, PostgreSQL's
// refusals of a statement and a caller that left are left as they are.
func TestClassify(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "unix", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	crash := &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P02",
		Message: "terminating connection because of crash of another server process"}
	canceled := &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "57014",
		Message: "canceling statement due to user request"}
	const (
		unreachable = "the database cannot be reached now; try again shortly"
		late        = "the database did not answer in time; try again shortly"
	)
	for _, tt := range []struct {
		name   string
		err    error
		kind   error // nil: returned as it is
		detail string
	}{
		{"an early EOF", io.ErrUnexpectedEOF, model.ErrUnavailable, unreachable},
		{"EOF", io.EOF, model.ErrUnavailable, unreachable},
		{"a reset", reset, model.ErrUnavailable, unreachable},
		{"a closed connection", fmt.Errorf("query: %w", pgconn.ErrConnClosed), model.ErrUnavailable, unreachable},
		{"a crash restart", crash, model.ErrUnavailable, unreachable},
		{"admin_shutdown", &pgconn.PgError{Severity: "FATAL", Code: "57P01"}, model.ErrUnavailable, unreachable},
		{"cannot_connect_now", &pgconn.PgError{Severity: "FATAL", Code: "57P03"}, model.ErrUnavailable, unreachable},
		{"connection_failure", &pgconn.PgError{Severity: "FATAL", Code: "08006"}, model.ErrUnavailable, unreachable},
		{"too_many_connections", &pgconn.PgError{Severity: "FATAL", Code: "53300"}, model.ErrUnavailable, unreachable},
		{"read_only_sql_transaction", &pgconn.PgError{Severity: "ERROR", Code: "25006"}, model.ErrUnavailable, unreachable},
		{"the deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), model.ErrUnavailable, late},
		{"the deadline's cancel request", canceled, model.ErrUnavailable, late},
		{"an early EOF after a commit was sent", sentCommit(io.ErrUnexpectedEOF), model.ErrOutcomeUnknown, ""},
		{"a reset after a commit was sent", sentCommit(reset), model.ErrOutcomeUnknown, ""},
		{"a crash restart after a commit was sent", sentCommit(crash), model.ErrOutcomeUnknown, ""},
		{"the deadline after a commit was sent", sentCommit(fmt.Errorf("timeout: %w", context.DeadlineExceeded)), model.ErrOutcomeUnknown, ""},
		// PostgreSQL's answer ends the transaction: nothing committed.
		{"the deadline's cancel request after a commit was sent", sentCommit(canceled), model.ErrUnavailable, late},
		{"unique_violation", &pgconn.PgError{Severity: "ERROR", Code: "23505"}, nil, ""},
		{"disk_full", &pgconn.PgError{Severity: "ERROR", Code: "53100"}, nil, ""}, // a 507 of its own
		{"unique_violation after a commit was sent", sentCommit(&pgconn.PgError{Severity: "ERROR", Code: "23505"}), nil, ""},
		{"a refusal of Herald's", model.Errorf(model.ErrNotFound, "message 7 does not exist"), nil, ""},
		{"a caller that left", context.Canceled, nil, ""},
		{"anything else", errors.New("something else"), nil, ""},
	} {
		got := classify(tt.err)
		if tt.kind == nil {
			if got != tt.err {
				t.Errorf("%s: classify(%v) = %v, want it as it is", tt.name, tt.err, got)
			}
			continue
		}
		var e *model.Error
		if !errors.Is(got, tt.kind) || !errors.As(got, &e) || e.RetryAfter <= 0 || !errors.Is(got, tt.err) {
			t.Errorf("%s: classify(%v) = %v, want %v with Retry-After and the error as its cause", tt.name, tt.err, got, tt.kind)
			continue
		}
		if tt.detail != "" && e.Detail != tt.detail {
			t.Errorf("%s: detail %q, want %q", tt.name, e.Detail, tt.detail)
		}
	}
}

// TestNoRetryAfterACommitWasSent: a deadlock or a serialization failure
// is run again, but not when its error came after a commit was sent.
func TestNoRetryAfterACommitWasSent(t *testing.T) {
	deadlock := &pgconn.PgError{Severity: "ERROR", Code: "40P01"}
	if !retryable(deadlock) {
		t.Error("a deadlock is not run again")
	}
	if retryable(&inDoubt{deadlock}) {
		t.Error("a deadlock met after a commit was sent is run again")
	}
}

// TestWritesFailingUntilACreate: a write refused for a full disk starts a
// spell of writes failing; another write's success (a login's token fits
// in pages the tables have) leaves it, and only a create's ends it.
func TestWritesFailingUntilACreate(t *testing.T) {
	ctx := context.Background()
	db := &DB{}
	full := &pgconn.PgError{Code: "53100"}
	if err := db.writeOutcome(full); !errors.Is(err, model.ErrNoSpace) {
		t.Fatalf("disk_full became %v, want model.ErrNoSpace", err)
	}
	if err := db.writeOutcome(nil); err != nil || db.WritesFailing(ctx) == nil {
		t.Errorf("after a smaller write's success: %v, writes failing %v; want them still failing", err, db.WritesFailing(ctx))
	}
	if err := db.createOutcome(full); !errors.Is(err, model.ErrNoSpace) || db.WritesFailing(ctx) == nil {
		t.Errorf("a create refused for room: %v, writes failing %v", err, db.WritesFailing(ctx))
	}
	if err := db.createOutcome(nil); err != nil || db.WritesFailing(ctx) != nil {
		t.Errorf("after a create's success: %v, writes failing %v; want none", err, db.WritesFailing(ctx))
	}
}
