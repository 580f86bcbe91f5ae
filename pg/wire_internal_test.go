package pg

import (
	"encoding/binary"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// A text[] that is not one dimension of present elements, or whose
// lengths run past its bytes, is left to pgx, never read past its end.
func TestWireTextArrayRefusesWhatItCannotRead(t *testing.T) {
	be := func(words ...int32) []byte {
		var b []byte
		for _, w := range words {
			b = binary.BigEndian.AppendUint32(b, uint32(w))
		}
		return b
	}
	fd := &pgconn.FieldDescription{DataTypeOID: pgtype.TextArrayOID, Format: 1}
	good := append(be(1, 0, 25, 2, 1, 1), 'a')
	good = append(good, be(0)...)
	if got, ok := wireTextArray(fd, good); !ok || len(got) != 2 || got[0] != "a" || got[1] != "" {
		t.Fatalf("a well-formed array read as %q, %v", got, ok)
	}
	for name, v := range map[string][]byte{
		"short header":         be(1, 0),
		"no dimensions, extra": be(0, 0, 25, 7),
		"one dimension, short": be(1, 0, 25),
		"two dimensions":       be(2, 0, 25, 1, 1, 1, 1, 1, 'a'),
		"has NULLs":            be(1, 1, 25, 1, 1, -1),
		"NULL element":         be(1, 0, 25, 1, 1, -1),
		"length past the end":  append(be(1, 0, 25, 1, 1, 5), 'a'),
		"more elements":        append(be(1, 0, 25, 1000000, 1, 1), 'a'),
		"bytes left over":      append(be(1, 0, 25, 1, 1, 1), 'a', 'b'),
		"missing element":      append(be(1, 0, 25, 2, 1, 1), 'a'),
	} {
		if got, ok := wireTextArray(fd, v); ok {
			t.Errorf("%s: read as %q", name, got)
		}
	}
	if _, ok := wireTextArray(&pgconn.FieldDescription{DataTypeOID: pgtype.Int8ArrayOID, Format: 1}, good); ok {
		t.Error("read an int8[] as text[]")
	}
}
