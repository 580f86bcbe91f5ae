package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"herald/bolt"
	"herald/pg"
)

// herald migrate --db FILE --to URL copies a stopped server's bbolt file
// into an empty PostgreSQL database, in one transaction, then compares
// the counts of both.

const migrateHelp = `Usage: herald migrate --db FILE --to URL

Copies a Herald database file into an empty PostgreSQL database, for
running Herald on PostgreSQL: accounts with their password hashes, roles
and suspensions, tokens (by hash; every token keeps working), messages
with their IDs, times, revisions, replies and mentions, the change log as
it was kept (live streams resume with the Last-Event-ID they had),
invitations with their uses, outstanding password resets (their codes
keep working), the audit log with its IDs and times, the records of
creates made with an Idempotency-Key (a retry still gets its first
answer), notifications with what was read of them, and the TLS
certificates and ACME account of --tls-domain. The guessing and write
limits start afresh. It creates Herald's schema if the database has none,
refuses a database that holds any Herald data, copies everything in one
transaction (all or nothing), and ends by comparing the counts.

The server must be stopped: the file is opened read-only, and a running
server's lock makes this fail at once. A file written by an older Herald,
or one where an account's deletion or an administrator's removal of an
account's messages was cut short, must be opened by this one first (start
it on the file once, and stop it).

Flags:
  --db FILE
    	database file (default: HERALD_DB, else herald.db)
  --to URL
    	the PostgreSQL database, postgres://... or postgresql://... (pgx
    	syntax; a Unix socket as postgres:///herald?host=/run/postgresql)
`

// runMigrate parses migrate's flags and runs it. Exit status: 0 when the
// copy is complete and the counts agree, 1 when it failed, 2 for a usage
// error.
func runMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("herald migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var from, to string
	fs.StringVar(&from, "db", "", "")
	fs.StringVar(&to, "to", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, migrateHelp)
			return 0
		}
		fmt.Fprintf(stderr, "herald migrate: %v; see herald migrate --help\n", err)
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(stderr, "herald migrate: unexpected argument %q; see herald migrate --help\n", fs.Arg(0))
		return 2
	}
	if from == "" {
		from = getenv("HERALD_DB")
	}
	if from == "" {
		from = "herald.db"
	}
	switch {
	case pg.IsURL(from):
		fmt.Fprintln(stderr, "herald migrate: --db names the bbolt file to copy from, not a PostgreSQL database")
		return 2
	case !pg.IsURL(to):
		fmt.Fprintln(stderr, "herald migrate: --to must be a PostgreSQL URL (postgres://... or postgresql://...); see herald migrate --help")
		return 2
	}
	if err := migrate(ctx, from, to, stdout); err != nil {
		fmt.Fprintf(stderr, "herald migrate: %s\n", plainError(err))
		return 1
	}
	return 0
}

// migrate copies the file at from into the database at to.
func migrate(ctx context.Context, from, to string, stdout io.Writer) error {
	snap, err := bolt.OpenSnapshot(from)
	if err != nil {
		return err
	}
	defer snap.Close()
	before, err := snap.Counts()
	if err != nil {
		return err
	}
	db, err := pg.Open(ctx, to, pg.Options{Logger: slog.New(slog.DiscardHandler), PoolSize: 2})
	if err != nil {
		return err
	}
	defer db.Close()
	im, err := db.BeginImport(ctx)
	if err != nil {
		return err
	}
	exported, err := snap.Export(bolt.Visitor{User: im.User, Token: im.Token, Message: im.Message, Change: im.Change,
		Invite: im.Invite, Reset: im.Reset, Audit: im.Audit, IdempotencyKey: im.IdempotencyKey,
		Notification: im.Notification, NotificationMark: im.NotificationMark, Cert: im.Cert, Settings: im.Settings,
		PushKeys: im.PushKeys, PushSubscription: im.PushSubscription, PushDelivery: im.PushDelivery, PushPosition: im.PushPosition})
	if err != nil {
		im.Abort()
		if errors.Is(err, bolt.ErrNotExportable) {
			return fmt.Errorf("%s cannot be copied as it is: %v; start this Herald on it once (herald --db %s), stop it, and migrate again", from, err, from)
		}
		return fmt.Errorf("reading %s: %w", from, err)
	}
	copied, err := im.Finish(pg.ImportState{
		UsersSeq: exported.UsersSeq, MessagesSeq: exported.MessagesSeq,
		InvitesSeq: exported.InvitesSeq, AuditSeq: exported.AuditSeq,
		ChangesHead: exported.ChangesHead, ChangesFloor: exported.ChangesFloor,
		PushSubscriptionsSeq: exported.PushSubscriptionsSeq,
	})
	if err != nil {
		return fmt.Errorf("copying into PostgreSQL: %w", err)
	}
	after, err := db.TableCounts(ctx)
	if err != nil {
		return fmt.Errorf("counting what PostgreSQL holds: %w", err)
	}
	fmt.Fprintf(stdout, "copied %s into %s\n", from, pg.Redact(to))
	fmt.Fprintf(stdout, "  %-15s %10s %10s\n", "", "file", "postgres")
	// The file's users, tokens and messages are counted apart from the
	// export, so a record the export skipped shows.
	rows := []struct {
		name        string
		file, there int
	}{
		{"users", before.Users, after.Users},
		{"tokens", before.Tokens, after.Tokens},
		{"messages", before.Messages, after.Messages},
		{"changes", exported.Changes, after.Changes},
		{"invitations", exported.Invites, after.Invites},
		{"password resets", exported.Resets, after.Resets},
		{"audit entries", exported.Audit, after.Audit},
		{"idempotency keys", exported.IdempotencyKeys, after.IdempotencyKeys},
		{"notifications", exported.Notifications, after.Notifications},
		{"certificates", exported.Certs, after.Certs},
		{"push subscriptions", exported.PushSubscriptions, after.PushSubscriptions},
	}
	mismatch := false
	for _, r := range rows {
		mark := ""
		if r.file != r.there {
			mark, mismatch = "  DIFFERENT", true
		}
		fmt.Fprintf(stdout, "  %-15s %10d %10d%s\n", r.name, r.file, r.there, mark)
	}
	fmt.Fprintf(stdout, "  change log positions %d to %d; next message ID %d\n", exported.ChangesFloor+1, exported.ChangesHead, exported.MessagesSeq+1)
	if mismatch || copied.Changes != exported.Changes || copied.Invites != exported.Invites ||
		copied.Resets != exported.Resets || copied.Audit != exported.Audit || copied.IdempotencyKeys != exported.IdempotencyKeys ||
		copied.Certs != exported.Certs || copied.Notifications != exported.Notifications ||
		copied.PushSubscriptions != exported.PushSubscriptions {
		return errors.New("the counts differ; the PostgreSQL database is not a faithful copy")
	}
	fmt.Fprintln(stdout, "  every count agrees")
	return nil
}
