package pg

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// pgEpochMicros is PostgreSQL's zero time, 2000-01-01 UTC, in microseconds
// since the Unix epoch: binary timestamps count from it.
const pgEpochMicros = 946_684_800_000_000

// scanWire is rows.Scan for the current row, reading the values Herald's
// reads ask for straight from their binary form on the wire. pgx's Scan
// finds a plan for every value it reads, and a page of messages is a
// token's row and 20 messages of seven columns: those plans, and the
// variables they make escape, are a large share of the instance's CPU
// (docs/performance.md, "PostgreSQL: rows read from their binary form"). In
// the binary form an int8 or a timestamptz is 8 bytes, big-endian, a bool
// one byte, a text or a bytea its bytes.
//
// Anything else — another destination type, a NULL where the destination
// cannot hold one, a value in the text form (a connection string that
// picks the simple protocol, for a pooler, gets text) — goes through
// rows.Scan, with pgx's answer and errors; what readWire wrote before it
// gave up is then written again, or the row's destinations are left to
// the error.
func scanWire(rows pgx.Rows, dest ...any) error {
	if !readWire(rows, dest) {
		return rows.Scan(dest...)
	}
	return nil
}

// readWire decodes the row into dest and reports whether it could.
func readWire(rows pgx.Rows, dest []any) bool {
	fds := rows.FieldDescriptions()
	vals := rows.RawValues()
	if len(fds) != len(dest) || len(vals) != len(dest) {
		return false
	}
	for i, d := range dest {
		fd, v := &fds[i], vals[i]
		if fd.Format != pgx.BinaryFormatCode && fd.DataTypeOID != pgtype.TextOID {
			return false
		}
		switch d := d.(type) {
		case *int64:
			if fd.DataTypeOID != pgtype.Int8OID || len(v) != 8 {
				return false
			}
			*d = int64(binary.BigEndian.Uint64(v))
		case *bool:
			if fd.DataTypeOID != pgtype.BoolOID || len(v) != 1 {
				return false
			}
			*d = v[0] == 1 // as pgx reads it
		case *string:
			if fd.DataTypeOID != pgtype.TextOID || v == nil {
				return false
			}
			*d = string(v)
		case **string:
			if fd.DataTypeOID != pgtype.TextOID {
				return false
			}
			*d = nil
			if v != nil {
				s := string(v)
				*d = &s
			}
		case *byteaString:
			if fd.DataTypeOID != pgtype.ByteaOID {
				return false
			}
			*d = byteaString(v) // NULL as ""
		case *[]byte:
			if fd.DataTypeOID != pgtype.ByteaOID {
				return false
			}
			*d = nil
			if v != nil {
				*d = append(make([]byte, 0, len(v)), v...)
			}
		case *time.Time:
			t, ok := wireTime(fd, v)
			if !ok || v == nil {
				return false
			}
			*d = t
		case **time.Time:
			t, ok := wireTime(fd, v)
			if !ok {
				return false
			}
			*d = nil
			if v != nil {
				*d = &t
			}
		case *[]string:
			s, ok := wireTextArray(fd, v)
			if !ok {
				return false
			}
			*d = s
		default:
			return false
		}
	}
	return true
}

// byteaString is a bytea read as a string. Messages' content is stored as
// bytea, since text cannot hold U+0000, and used as a string: read into
// one straight from the wire, it is copied once, not into a []byte and
// again into a string. pgx reads one through Scan (NULL as "").
type byteaString string

// Scan is sql.Scanner's, which pgx calls with the bytea's bytes.
func (s *byteaString) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*s = ""
	case []byte:
		*s = byteaString(v)
	default:
		return fmt.Errorf("pg: cannot read %T as a bytea", src)
	}
	return nil
}

// wireTime reads a binary timestamptz, in the local zone as pgx does
// (NULL as the zero time).
// Infinite times are left to pgx: Herald never stores one.
func wireTime(fd *pgconn.FieldDescription, v []byte) (time.Time, bool) {
	if fd.DataTypeOID != pgtype.TimestamptzOID {
		return time.Time{}, false
	}
	if v == nil {
		return time.Time{}, true
	}
	if len(v) != 8 {
		return time.Time{}, false
	}
	us := int64(binary.BigEndian.Uint64(v))
	if us == math.MinInt64 || us > math.MaxInt64-pgEpochMicros {
		return time.Time{}, false
	}
	return time.UnixMicro(us + pgEpochMicros), true
}

// wireTextArray reads a binary text[] of one dimension with no NULL
// elements (NULL as nil): a header of five int32s (dimensions, whether
// there are NULLs, the elements' type, the length, the lower bound), then
// each element as an int32 length and its bytes. An empty array has no
// dimensions.
func wireTextArray(fd *pgconn.FieldDescription, v []byte) ([]string, bool) {
	if fd.DataTypeOID != pgtype.TextArrayOID {
		return nil, false
	}
	if v == nil {
		return nil, true
	}
	if len(v) < 12 {
		return nil, false
	}
	dims, nulls := binary.BigEndian.Uint32(v), binary.BigEndian.Uint32(v[4:])
	if nulls != 0 || dims > 1 {
		return nil, false
	}
	if dims == 0 {
		return []string{}, len(v) == 12
	}
	if len(v) < 20 {
		return nil, false
	}
	n := binary.BigEndian.Uint32(v[12:])
	v = v[20:]
	if uint64(n) > uint64(len(v)/4) {
		return nil, false
	}
	out := make([]string, 0, n)
	for range n {
		if len(v) < 4 {
			return nil, false
		}
		size := binary.BigEndian.Uint32(v)
		v = v[4:]
		if uint64(size) > uint64(len(v)) {
			return nil, false // also a NULL element's length, -1
		}
		out = append(out, string(v[:size]))
		v = v[size:]
	}
	return out, len(v) == 0
}
