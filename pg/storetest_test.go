package pg_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/bolt"
	"herald/pg"
	"herald/storetest"
)

// openForSuite opens a PostgreSQL store on a fresh database for the
// conformance suite, closed at cleanup.
func openForSuite(t *testing.T, now func() time.Time) storetest.Opened {
	t.Helper()
	db, url := open(t, pg.Options{Now: now})
	return storetest.Opened{
		Store: db,
		Counts: func(ctx context.Context) (storetest.Counts, error) {
			c, err := db.Counts(ctx)
			return storetest.Counts(c), err
		},
		Copy:               func(ctx context.Context) ([]byte, error) { return dump(ctx, url) },
		IdempotencyRecords: func(ctx context.Context) ([][]byte, error) { return idempotencyRows(ctx, url) },
	}
}

// idempotencyRows returns every row of idempotency_keys, its columns end
// to end as the server sends them in text.
func idempotencyRows(ctx context.Context, url string) ([][]byte, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT concat_ws(' ', user_id, key, fingerprint, message_id, created_at) FROM idempotency_keys`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]byte, error) {
		var b []byte
		err := row.Scan(&b)
		return b, err
	})
}

// dump returns the rows of every table of the database at url, as COPY
// writes them, which is what pg_dump writes of them.
func dump(ctx context.Context, url string) ([]byte, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT quote_ident(table_name) FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`)
	if err != nil {
		return nil, err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, table := range tables {
		if _, err := conn.PgConn().CopyTo(ctx, &out, "COPY "+table+" TO STDOUT"); err != nil {
			return nil, err
		}
	}
	return out.Bytes(), nil
}

func openBolt(t *testing.T, now func() time.Time) storetest.Opened {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), bolt.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return storetest.Opened{
		Store: db,
		Counts: func(context.Context) (storetest.Counts, error) {
			c, err := db.Counts()
			return storetest.Counts(c), err
		},
	}
}

func TestStoreConformance(t *testing.T) {
	storetest.Run(t, openForSuite)
}

// TestSearchSameAsBolt: the same content and the same searches give the
// same pages, cursors and change log on both stores.
func TestSearchSameAsBolt(t *testing.T) {
	storetest.CompareSearch(t, openBolt, openForSuite)
}
