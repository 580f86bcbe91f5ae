package bolt

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"time"

	"herald/model"
)

func TestMessageRecordRoundTrip(t *testing.T) {
	for _, m := range []*model.Message{
		{ID: 1, OwnerID: 2, Content: "hello", CreatedAt: testEpoch.Truncate(time.Microsecond), UpdatedAt: testEpoch.Truncate(time.Microsecond).Add(time.Hour), Revision: 1},
		{ID: math.MaxUint64, OwnerID: math.MaxUint64, Content: "Ünïcödé 日本語 😀", CreatedAt: time.UnixMicro(0).UTC(), UpdatedAt: time.UnixMicro(-1).UTC(), Revision: math.MaxUint64},
		{ID: 7, Content: "", CreatedAt: time.UnixMicro(math.MaxInt64).UTC(), UpdatedAt: time.UnixMicro(math.MinInt64).UTC()},
	} {
		b := encodeMessage(m)
		got, err := decodeMessage(m.ID, b)
		if err != nil {
			t.Fatalf("decodeMessage(encodeMessage(%s)) = %v", messageString(m), err)
		}
		if g, w := messageString(got), messageString(m); g != w {
			t.Errorf("decodeMessage(encodeMessage(m)) = %s, want %s", g, w)
		}
		if got, want := timeFromKey(timeIndexKey(m.CreatedAt, m.ID)), m.CreatedAt; !got.Equal(want) {
			t.Errorf("timeFromKey(timeIndexKey(%v)) = %v", want, got)
		}
	}
}

func TestDecodeMessageBadRecord(t *testing.T) {
	good := encodeMessage(&model.Message{OwnerID: 1, Content: "x", CreatedAt: testEpoch, UpdatedAt: testEpoch, Revision: 1})
	for name, b := range map[string][]byte{
		"Nil":         nil,
		"Empty":       {},
		"Header-1":    good[:messageHeaderLen-1],
		"Version0":    append([]byte{0}, good[1:]...),
		"Version2":    append([]byte{2}, good[1:]...),
		"OnlyVersion": {messageRecordVersion},
	} {
		if m, err := decodeMessage(1, b); err == nil {
			t.Errorf("decodeMessage(%s) = %s, want an error", name, messageString(m))
		}
	}
	// A header with no content is a valid record of empty content.
	if _, err := decodeMessage(1, good[:messageHeaderLen]); err != nil {
		t.Errorf("decodeMessage(header only) = %v, want nil", err)
	}
}

func TestTokenRecordRoundTrip(t *testing.T) {
	tok := &model.Token{Hash: tokenHash("x"), UserID: 42, CreatedAt: testEpoch.Truncate(time.Microsecond), ExpiresAt: testEpoch.Truncate(time.Microsecond).Add(defaultTTL)}
	b := encodeToken(tok)
	if got, want := len(b), tokenRecordLen; got != want {
		t.Fatalf("len(encodeToken) = %d, want %d", got, want)
	}
	got, err := decodeToken(tok.Hash, b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Hash != tok.Hash || got.UserID != tok.UserID || !got.CreatedAt.Equal(tok.CreatedAt) || !got.ExpiresAt.Equal(tok.ExpiresAt) {
		t.Errorf("decodeToken(encodeToken(t)) = %+v, want %+v", got, tok)
	}
	for _, n := range []int{0, 1, tokenRecordLen - 1, tokenRecordLen + 1} {
		if _, err := decodeToken(tok.Hash, make([]byte, n)); err == nil {
			t.Errorf("decodeToken(%d bytes) = nil error, want an error", n)
		}
	}
}

func TestUserRecordRoundTrip(t *testing.T) {
	at := testEpoch.Truncate(time.Microsecond)
	for _, u := range []*model.User{
		{ID: 3, Email: "Ünïcödé@Example.com", PasswordHash: fakePasswordHash, Roles: []string{model.RoleUser}, CreatedAt: at},
		{ID: 4, Email: "root@example.com", PasswordHash: fakePasswordHash, Roles: []string{model.RoleUser, model.RoleAdmin}, CreatedAt: at, Suspended: true, LastSeenAt: at.Add(time.Hour)},
	} {
		b := encodeUser(u)
		got, err := decodeUser(u.ID, b)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != u.ID || got.Email != u.Email || got.PasswordHash != u.PasswordHash || !slices.Equal(got.Roles, u.Roles) ||
			!got.CreatedAt.Equal(u.CreatedAt) || got.Suspended != u.Suspended || !got.LastSeenAt.Equal(u.LastSeenAt) {
			t.Errorf("decodeUser(encodeUser(u)) = %+v, want %+v", got, u)
		}
		if email, ok := userEmail(b); !ok || email != u.Email {
			t.Errorf("userEmail = %q, %v; want %q", email, ok, u.Email)
		}
		for n := range b {
			if _, err := decodeUser(1, b[:n]); err == nil {
				t.Errorf("decodeUser(first %d of %d bytes) = nil error, want an error", n, len(b))
			}
			if _, ok := userEmail(b[:n]); ok {
				t.Errorf("userEmail(first %d of %d bytes) read an e-mail", n, len(b))
			}
		}
		for _, garbage := range []string{"{not json", `{"email":"a@b"}`, string(append(b, 0))} {
			if _, err := decodeUser(1, []byte(garbage)); err == nil {
				t.Errorf("decodeUser(%q) = nil error, want an error", garbage)
			}
		}
	}
	// A record of layouts 2 to 6, which only the upgrade reads.
	v1 := []byte{userRecordVersionV1}
	v1 = binary.BigEndian.AppendUint64(v1, uint64(at.UnixMicro()))
	v1 = append(binary.BigEndian.AppendUint16(v1, 3), "a@b"...)
	v1 = append(binary.BigEndian.AppendUint16(v1, 4), "hash"...)
	v1 = append(v1, 1, byte(len(model.RoleUser)))
	v1 = append(v1, model.RoleUser...)
	if got, err := decodeUserV1(7, v1); err != nil || got.Email != "a@b" || got.PasswordHash != "hash" || !got.LastSeenAt.IsZero() {
		t.Errorf("decodeUserV1 = %+v, %v", got, err)
	}
	if _, err := decodeUser(7, v1); err == nil {
		t.Errorf("decodeUser read a version-1 record; only the upgrade should")
	}
}

// FuzzDecodeMessage feeds arbitrary bytes to the record decoders: they must
// never panic, must refuse what they cannot read, and what they accept must
// re-encode to the same bytes and must not alias the input (bbolt reuses it
// once the transaction ends).
func FuzzDecodeMessage(f *testing.F) {
	f.Add(uint64(1), encodeMessage(&model.Message{OwnerID: 1, Content: "hello", CreatedAt: testEpoch, UpdatedAt: testEpoch, Revision: 1}))
	f.Add(uint64(2), encodeMessage(&model.Message{OwnerID: 9, Content: "Ünïcödé 日本語 😀", Revision: 3}))
	f.Add(uint64(3), encodeMessage(&model.Message{Content: "bad \xff utf-8"}))
	f.Add(uint64(0), []byte{})
	f.Add(uint64(0), []byte{messageRecordVersion})
	f.Add(uint64(math.MaxUint64), bytes.Repeat([]byte{0xff}, messageHeaderLen))
	f.Add(uint64(4), encodeToken(&model.Token{UserID: 1, CreatedAt: testEpoch, ExpiresAt: testEpoch.Add(time.Hour)}))
	f.Fuzz(func(t *testing.T, id uint64, b []byte) {
		orig := bytes.Clone(b)

		m, err := decodeMessage(id, b)
		if ok := len(b) >= messageHeaderLen && b[0] == messageRecordVersion; ok != (err == nil) {
			t.Fatalf("decodeMessage(%d, %x) error = %v, want error %v", id, b, err, !ok)
		}
		if err == nil {
			if got, want := m.ID, id; got != want {
				t.Fatalf("ID = %d, want %d", got, want)
			}
			if got, want := m.OwnerID, binary.BigEndian.Uint64(b[1:]); got != want {
				t.Fatalf("OwnerID = %d, want %d", got, want)
			}
			if got, want := m.Content, string(b[messageHeaderLen:]); got != want {
				t.Fatalf("Content = %q, want %q", got, want)
			}
			if got, want := m.OwnerEmail, ""; got != want {
				t.Fatalf("OwnerEmail = %q, want %q (joined on read, not stored)", got, want)
			}
			if got := encodeMessage(m); !bytes.Equal(got, b) {
				t.Fatalf("encodeMessage(decodeMessage(%x)) = %x", b, got)
			}
		}

		if u, err := decodeUser(id, b); err == nil {
			if got := encodeUser(u); !bytes.Equal(got, b) {
				t.Fatalf("encodeUser(decodeUser(%x)) = %x", b, got)
			}
		}

		var h model.TokenHash
		copy(h[:], b)
		tok, err := decodeToken(h, b)
		if ok := len(b) == tokenRecordLen; ok != (err == nil) {
			t.Fatalf("decodeToken(%x) error = %v, want error %v", b, err, !ok)
		}
		if err == nil {
			if got, want := tok.UserID, binary.BigEndian.Uint64(b); got != want {
				t.Fatalf("UserID = %d, want %d", got, want)
			}
			if got := encodeToken(tok); !bytes.Equal(got, b) {
				t.Fatalf("encodeToken(decodeToken(%x)) = %x", b, got)
			}
		}

		// The decoders copied what they kept: scribbling over the input
		// (as bbolt does to freed pages) changes nothing.
		for i := range b {
			b[i] ^= 0xff
		}
		if m != nil {
			if got, want := m.Content, string(orig[messageHeaderLen:]); got != want {
				t.Fatalf("Content changed with the input buffer: %q, want %q", got, want)
			}
		}
		if tok != nil {
			if got, want := tok.UserID, binary.BigEndian.Uint64(orig); got != want {
				t.Fatalf("token UserID changed with the input buffer: %d, want %d", got, want)
			}
		}
	})
}
