package pg_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/pg"
)

// scanWire must give what pgx's Scan gives, for every kind of value
// Herald's reads ask for, and read them itself when they come binary.
func TestScanWire(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url := cluster.Database(t)
	const values = `SELECT * FROM (VALUES
		(1::bigint, true, 'plain'::text, NULL::text, '\x00ff'::bytea, NULL::bytea, '\x61ff00'::bytea, NULL::bytea, '2026-11-26 03:04:05.123456+00'::timestamptz, NULL::timestamptz, '{}'::text[], NULL::text[]),
		(-9223372036854775808, false, '', 'ünïcödé σ', ''::bytea, '\x41'::bytea, convert_to('ünï σ', 'UTF8'), '\x42'::bytea, '1970-01-01 00:00:00+00', '1999-12-31 23:59:59.999999+00', '{admin}', '{a,"b c",""}'),
		(9223372036854775807, true, 'x', '', '\x'::bytea, ''::bytea, ''::bytea, ''::bytea, '0001-01-01 00:00:00+00', '2000-01-01 00:00:00+00', '{"ü",x}', '{}'),
		-- 12345678 is 8 bytes in the text form too, as a binary int8.
		(12345678, false, 'y', NULL, '\x01'::bytea, NULL, '\x01'::bytea, NULL, '2026-01-01 00:00:00+00', NULL, '{}', NULL)
	) v`
	type row struct {
		i         int64
		b         bool
		s         string
		sp        *string
		bs, bsn   []byte
		cs, csn   pg.ByteaString
		t         time.Time
		tp        *time.Time
		arr, arrn []string
	}
	dests := func(r *row) []any {
		return []any{&r.i, &r.b, &r.s, &r.sp, &r.bs, &r.bsn, &r.cs, &r.csn, &r.t, &r.tp, &r.arr, &r.arrn}
	}
	for _, c := range []struct {
		mode string
		wire bool // whether scanWire must read the values itself
	}{
		{"", true},
		{"simple_protocol", false},
	} {
		t.Run("mode="+c.mode, func(t *testing.T) {
			u := url
			if c.mode != "" {
				u += "&default_query_exec_mode=" + c.mode
			}
			conn, err := pgx.Connect(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			rows, err := conn.Query(ctx, values)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			n := 0
			// One set of destinations for every row, as a page's read
			// has: a NULL after a value must leave no trace of it.
			var got row
			for rows.Next() {
				n++
				var want, again row
				if err := rows.Scan(dests(&want)...); err != nil {
					t.Fatal(err)
				}
				if err := pg.ScanWire(rows, dests(&got)...); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("row %d: scanWire read\n%+v\npgx's Scan\n%+v", n, got, want)
				}
				if wire := pg.ReadWire(rows, dests(&again)...); wire != c.wire {
					t.Errorf("row %d: read from the wire form %v, want %v", n, wire, c.wire)
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			if n != 4 {
				t.Fatalf("%d rows", n)
			}
			rows.Close()
			// A row whose text form has the lengths of the binary one: only
			// the columns' format tells them apart.
			var num, numWant int64
			var word, wordWant string
			if err := conn.QueryRow(ctx, `SELECT 12345678::bigint, 'x'::text`).Scan(&numWant, &wordWant); err != nil {
				t.Fatal(err)
			}
			rows, err = conn.Query(ctx, `SELECT 12345678::bigint, 'x'::text`)
			if err != nil {
				t.Fatal(err)
			}
			if !rows.Next() {
				t.Fatal(rows.Err())
			}
			if wire := pg.ReadWire(rows, &num, &word); wire != c.wire {
				t.Errorf("8 bytes either way: read from the wire form %v, want %v", wire, c.wire)
			}
			if err := pg.ScanWire(rows, &num, &word); err != nil || num != numWant || word != wordWant {
				t.Errorf("8 bytes either way: read %d %q (%v), want %d %q", num, word, err, numWant, wordWant)
			}
			rows.Close()
		})
	}
}

// A destination scanWire does not know, or a NULL it cannot hold, goes to
// pgx's Scan and gets its answer, error included.
func TestScanWireLeavesTheRestToPgx(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, cluster.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT 7::int4, NULL::bigint`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatal(rows.Err())
	}
	var small int32
	var big int64
	if pg.ReadWire(rows, &small, &big) {
		t.Fatal("read an int4 and a NULL int8 from the wire form itself")
	}
	err = pg.ScanWire(rows, &small, &big)
	if err == nil || small != 7 {
		t.Fatalf("got %d, %v; want 7 and pgx's error for a NULL into int64", small, err)
	}
	rows.Close()
	// A NULL into a destination that cannot hold one, first in its row.
	for _, c := range []struct {
		sql  string
		dest any
	}{
		{`SELECT NULL::bigint`, new(int64)},
		{`SELECT NULL::bool`, new(bool)},
		{`SELECT NULL::text`, new(string)},
		{`SELECT NULL::timestamptz`, new(time.Time)},
	} {
		rows, err := conn.Query(ctx, c.sql)
		if err != nil {
			t.Fatal(err)
		}
		if !rows.Next() {
			t.Fatal(rows.Err())
		}
		if pg.ReadWire(rows, c.dest) {
			t.Errorf("%s: read from the wire form into %T", c.sql, c.dest)
		}
		if err := pg.ScanWire(rows, c.dest); err == nil {
			t.Errorf("%s into %T: no error", c.sql, c.dest)
		}
		rows.Close()
	}
}
