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
		(1::bigint, true, 'plain'::text, NULL::text, '\x00ff'::bytea, NULL::bytea, '2026-11-26 03:04:05.123456+00'::timestamptz, NULL::timestamptz, '{}'::text[], NULL::text[]),
		(-9223372036854775808, false, '', 'ünïcödé σ', ''::bytea, '\x41'::bytea, '1970-01-01 00:00:00+00', '1999-12-31 23:59:59.999999+00', '{admin}', '{a,"b c",""}'),
		(9223372036854775807, true, 'x', '', '\x'::bytea, ''::bytea, '0001-01-01 00:00:00+00', '2000-01-01 00:00:00+00', '{"ü",x}', '{}')
	) v`
	type row struct {
		i         int64
		b         bool
		s         string
		sp        *string
		bs, bsn   []byte
		t         time.Time
		tp        *time.Time
		arr, arrn []string
	}
	dests := func(r *row) []any {
		return []any{&r.i, &r.b, &r.s, &r.sp, &r.bs, &r.bsn, &r.t, &r.tp, &r.arr, &r.arrn}
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
			for rows.Next() {
				n++
				var want, got, again row
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
			if n != 3 {
				t.Fatalf("%d rows", n)
			}
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
}
