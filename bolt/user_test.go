package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/model"
)

func TestCreateUser(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		db := mustOpen(t)
		u := &model.User{Email: "  Ada@Example.com\t", PasswordHash: fakePasswordHash}
		h := tokenHash("first")
		tok, err := db.CreateUser(context.Background(), u, h, time.Hour, nil)
		if err != nil {
			t.Fatalf("CreateUser = %v", err)
		}
		wantCreated := testEpoch.Truncate(time.Microsecond)
		if got, want := u.ID, uint64(1); got != want {
			t.Errorf("ID = %d, want %d", got, want)
		}
		if got, want := u.Email, "Ada@Example.com"; got != want {
			t.Errorf("Email = %q, want %q (trimmed, case kept)", got, want)
		}
		if got, want := u.Roles, []string{model.RoleUser}; !slices.Equal(got, want) {
			t.Errorf("Roles = %q, want %q", got, want)
		}
		if got, want := u.CreatedAt, wantCreated; !got.Equal(want) {
			t.Errorf("CreatedAt = %v, want %v", got, want)
		}
		if got, want := u.PasswordHash, fakePasswordHash; got != want {
			t.Errorf("PasswordHash = %q, want %q", got, want)
		}
		if got, want := tok.Hash, h; got != want {
			t.Errorf("token Hash = %x, want %x", got, want)
		}
		if got, want := tok.UserID, u.ID; got != want {
			t.Errorf("token UserID = %d, want %d", got, want)
		}
		if got, want := tok.CreatedAt, wantCreated; !got.Equal(want) {
			t.Errorf("token CreatedAt = %v, want %v", got, want)
		}
		if got, want := tok.ExpiresAt, wantCreated.Add(time.Hour); !got.Equal(want) {
			t.Errorf("token ExpiresAt = %v, want %v", got, want)
		}

		// The stored account reads back the same way.
		got, err := db.UserByID(context.Background(), u.ID)
		if err != nil {
			t.Fatalf("UserByID = %v", err)
		}
		if got.Email != u.Email || got.PasswordHash != u.PasswordHash ||
			!slices.Equal(got.Roles, u.Roles) || !got.CreatedAt.Equal(u.CreatedAt) {
			t.Errorf("UserByID = %+v, want %+v", got, u)
		}

		// The registration token authenticates the new account.
		au, atok, err := db.Authenticate(context.Background(), h)
		if err != nil {
			t.Fatalf("Authenticate(registration token) = %v", err)
		}
		if got, want := au.ID, u.ID; got != want {
			t.Errorf("Authenticate user ID = %d, want %d", got, want)
		}
		if got, want := atok.ExpiresAt, tok.ExpiresAt; !got.Equal(want) {
			t.Errorf("Authenticate token ExpiresAt = %v, want %v", got, want)
		}
		if got, want := mustCounts(t, db), (Counts{Users: 1, Tokens: 1}); got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}

		// IDs keep counting.
		bob, _ := mustCreateUser(t, db, "bob@example.com")
		if got, want := bob.ID, uint64(2); got != want {
			t.Errorf("second user ID = %d, want %d", got, want)
		}
	})

	t.Run("ErrConflict", func(t *testing.T) {
		for _, email := range []string{
			"ada@example.com",
			"ADA@EXAMPLE.COM",
			"Ada@Example.Com",
			"  ada@example.com  ",
			"\tADA@example.com\n",
		} {
			t.Run(email, func(t *testing.T) {
				db := mustOpen(t)
				orig, origHash := mustCreateUser(t, db, "Ada@Example.com")
				before := mustCounts(t, db)

				u := &model.User{Email: email, PasswordHash: "other"}
				tok, err := db.CreateUser(context.Background(), u, tokenHash("intruder"), time.Hour, nil)
				if !errors.Is(err, model.ErrConflict) {
					t.Fatalf("CreateUser(%q) = %v, want ErrConflict", email, err)
				}
				if tok != nil {
					t.Errorf("CreateUser(%q) token = %+v, want nil", email, tok)
				}
				if got, want := u.ID, uint64(0); got != want {
					t.Errorf("ID after conflict = %d, want %d", got, want)
				}
				if got, want := mustCounts(t, db), before; got != want {
					t.Errorf("Counts() after conflict = %+v, want %+v", got, want)
				}
				if _, _, err := db.Authenticate(context.Background(), tokenHash("intruder")); !errors.Is(err, model.ErrUnauthorized) {
					t.Errorf("Authenticate(refused registration's token) = %v, want ErrUnauthorized", err)
				}
				// The original account is untouched.
				got, err := db.UserByEmail(context.Background(), "ada@example.com")
				if err != nil {
					t.Fatal(err)
				}
				if got.ID != orig.ID || got.Email != orig.Email || got.PasswordHash != orig.PasswordHash {
					t.Errorf("UserByEmail = %+v, want %+v", got, orig)
				}
				if _, _, err := db.Authenticate(context.Background(), origHash); err != nil {
					t.Errorf("Authenticate(original token) = %v, want nil", err)
				}
			})
		}
	})

	// Greek capital Σ lower-cases to σ, never to the final ς, so lower-casing
	// alone keeps ΟΔΥΣΣΕΥΣ@… and οδυσσευς@… apart although they differ only
	// in letter case (strings.EqualFold says they are equal).
	t.Run("ErrConflictCanonicalEquivalent", func(t *testing.T) {
		db := mustOpen(t)
		const composed, decomposed = "jos\u00e9@example.com", "JOSE\u0301@example.com"
		mustCreateUser(t, db, composed)
		u := &model.User{Email: decomposed, PasswordHash: fakePasswordHash}
		if _, err := db.CreateUser(context.Background(), u, tokenHash("decomposed"), time.Hour, nil); !errors.Is(err, model.ErrConflict) {
			t.Errorf("CreateUser(%q) after %q = %v, want ErrConflict", decomposed, composed, err)
		}
		if got, err := db.UserByEmail(context.Background(), decomposed); err != nil || got.Email != composed {
			t.Errorf("UserByEmail(%q) = %v, %v; want the account %q", decomposed, got, err, composed)
		}
	})
	t.Run("ErrConflictGreekFinalSigma", func(t *testing.T) {
		db := mustOpen(t)
		const lower, upper = "οδυσσευς@example.gr", "ΟΔΥΣΣΕΥΣ@example.gr"
		if !strings.EqualFold(lower, upper) {
			t.Fatalf("strings.EqualFold(%q, %q) = false", lower, upper)
		}
		mustCreateUser(t, db, lower)
		u := &model.User{Email: upper, PasswordHash: fakePasswordHash}
		if _, err := db.CreateUser(context.Background(), u, tokenHash("upper"), time.Hour, nil); !errors.Is(err, model.ErrConflict) {
			t.Errorf("CreateUser(%q) after %q = %v, want ErrConflict", upper, lower, err)
		}
		if got, err := db.UserByEmail(context.Background(), upper); err != nil || got.Email != lower {
			t.Errorf("UserByEmail(%q) = %v, %v; want the account %q", upper, got, err, lower)
		}
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		for _, email := range []string{"", "   ", "nobody", "a@b@c", "@example.com", "ada@", "a b@example.com", "ada\xff@example.com", strings.Repeat("a", 250) + "@b.co"} {
			t.Run(email, func(t *testing.T) {
				db := mustOpen(t)
				u := &model.User{Email: email, PasswordHash: fakePasswordHash}
				tok, err := db.CreateUser(context.Background(), u, tokenHash("t"), time.Hour, nil)
				if got, want := violationFields(t, err), []string{"email"}; !slices.Equal(got, want) {
					t.Errorf("CreateUser(%q) fields = %q, want %q", email, got, want)
				}
				if tok != nil {
					t.Errorf("CreateUser(%q) token = %+v, want nil", email, tok)
				}
				if got, want := mustCounts(t, db), (Counts{}); got != want {
					t.Errorf("Counts() = %+v, want %+v", got, want)
				}
			})
		}
	})

	t.Run("EmptyPasswordHash", func(t *testing.T) {
		db := mustOpen(t)
		u := &model.User{Email: "ada@example.com"}
		if _, err := db.CreateUser(context.Background(), u, tokenHash("t"), time.Hour, nil); err == nil {
			t.Fatalf("CreateUser without a password hash = nil, want an error")
		}
		if got, want := mustCounts(t, db), (Counts{}); got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}
	})
}

func TestUserByEmail(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "Ada@Example.com")
	mustCreateUser(t, db, "bob@example.com")
	uni, _ := mustCreateUser(t, db, "Ünïcödé@Example.com")

	t.Run("OK", func(t *testing.T) {
		for _, tt := range []struct {
			query string
			want  *model.User
		}{
			{"Ada@Example.com", ada},
			{"ada@example.com", ada},
			{"ADA@EXAMPLE.COM", ada},
			{"  ada@example.com\t", ada},
			{"ünïcödé@example.com", uni},
			{"ÜNÏCÖDÉ@EXAMPLE.COM", uni},
		} {
			got, err := db.UserByEmail(context.Background(), tt.query)
			if err != nil {
				t.Errorf("UserByEmail(%q) = %v", tt.query, err)
				continue
			}
			if got.ID != tt.want.ID || got.Email != tt.want.Email {
				t.Errorf("UserByEmail(%q) = %d %q, want %d %q", tt.query, got.ID, got.Email, tt.want.ID, tt.want.Email)
			}
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		for _, q := range []string{"", "   ", "carol@example.com", "ada@example.co", "ada"} {
			u, err := db.UserByEmail(context.Background(), q)
			if !errors.Is(err, model.ErrNotFound) {
				t.Errorf("UserByEmail(%q) = %v, want ErrNotFound", q, err)
			}
			if u != nil {
				t.Errorf("UserByEmail(%q) user = %+v, want nil", q, u)
			}
		}
	})
}

func TestUserByID(t *testing.T) {
	db := mustOpen(t)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	t.Run("OK", func(t *testing.T) {
		got, err := db.UserByID(context.Background(), ada.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := got.Email, ada.Email; got != want {
			t.Errorf("Email = %q, want %q", got, want)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		for _, id := range []uint64{0, ada.ID + 1, 1 << 63} {
			if _, err := db.UserByID(context.Background(), id); !errors.Is(err, model.ErrNotFound) {
				t.Errorf("UserByID(%d) = %v, want ErrNotFound", id, err)
			}
		}
	})
}

func TestSetPasswordHash(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		db := mustOpen(t)
		ada, h := mustCreateUser(t, db, "Ada@Example.com")
		const newHash = "$argon2id$v=19$m=131072,t=2,p=4$bmV3$bmV3"
		if err := db.SetPasswordHash(context.Background(), ada.ID, fakePasswordHash, newHash); err != nil {
			t.Fatalf("SetPasswordHash = %v", err)
		}
		got, err := db.UserByEmail(context.Background(), "ada@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := got.PasswordHash, newHash; got != want {
			t.Errorf("PasswordHash = %q, want %q", got, want)
		}
		// Nothing else about the account moves.
		if got.ID != ada.ID || got.Email != ada.Email || !slices.Equal(got.Roles, ada.Roles) || !got.CreatedAt.Equal(ada.CreatedAt) {
			t.Errorf("user after SetPasswordHash = %+v, want %+v with a new hash", got, ada)
		}
		if _, _, err := db.Authenticate(context.Background(), h); err != nil {
			t.Errorf("Authenticate after SetPasswordHash = %v, want nil", err)
		}
		if got, want := mustCounts(t, db), (Counts{Users: 1, Tokens: 1}); got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}
		checkIndexes(t, db.DB)
	})
	t.Run("ChangedMeanwhile", func(t *testing.T) {
		// A password change committed while the login re-hashed: the
		// upgrade must not put the old password back.
		db := mustOpen(t)
		ada, h := mustCreateUser(t, db, "ada@example.com")
		if err := db.ChangePassword(context.Background(), model.ByToken(h), "$argon2id$changed"); err != nil {
			t.Fatal(err)
		}
		if err := db.SetPasswordHash(context.Background(), ada.ID, fakePasswordHash, "$argon2id$rehashed-old"); err != nil {
			t.Fatal(err)
		}
		if u, _ := db.UserByID(context.Background(), ada.ID); u.PasswordHash != "$argon2id$changed" {
			t.Errorf("PasswordHash = %q, want the changed one kept", u.PasswordHash)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		if err := db.SetPasswordHash(context.Background(), ada.ID+1, fakePasswordHash, "x"); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("SetPasswordHash(missing) = %v, want ErrNotFound", err)
		}
		if got, want := mustCounts(t, db), (Counts{Users: 1, Tokens: 1}); got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}
	})
}

func TestChangePassword(t *testing.T) {
	db := mustOpen(t)
	ada, adaReg := mustCreateUser(t, db, "ada@example.com")
	_, bobReg := mustCreateUser(t, db, "bob@example.com")
	laptop, phone := tokenHash("laptop"), tokenHash("phone")
	for _, h := range []model.TokenHash{laptop, phone} {
		if _, err := db.CreateToken(ada.ID, h, defaultTTL); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.ChangePassword(context.Background(), model.ByToken(laptop), "$argon2id$new"); err != nil {
		t.Fatal(err)
	}
	u, err := db.UserByID(context.Background(), ada.ID)
	if err != nil || u.PasswordHash != "$argon2id$new" {
		t.Errorf("after ChangePassword: %+v, %v", u, err)
	}
	if _, _, err := db.Authenticate(context.Background(), laptop); err != nil {
		t.Errorf("the token that changed the password: %v", err)
	}
	for _, h := range []model.TokenHash{adaReg, phone} {
		if _, _, err := db.Authenticate(context.Background(), h); !errors.Is(err, model.ErrUnauthorized) {
			t.Errorf("another token after the change = %v, want ErrUnauthorized", err)
		}
	}
	if _, _, err := db.Authenticate(context.Background(), bobReg); err != nil {
		t.Errorf("bob's token after ada's change: %v", err)
	}
	if err := db.ChangePassword(context.Background(), model.ByToken(phone), "$argon2id$again"); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("ChangePassword with a revoked token = %v, want ErrUnauthorized", err)
	}
}

func TestUserRecordRoundTrip(t *testing.T) {
	at := testEpoch.Truncate(time.Microsecond)
	for _, u := range []*model.User{
		{ID: 3, Email: "Ünïcödé@Example.com", Handle: "ncd", Name: "Ünïcödé", PasswordHash: fakePasswordHash, Roles: []string{model.RoleUser}, CreatedAt: at},
		{ID: 4, Email: "root@example.com", Handle: "root", Name: "root", PasswordHash: fakePasswordHash, Roles: []string{model.RoleUser, model.RoleAdmin}, CreatedAt: at, Suspended: true, LastSeenAt: at.Add(time.Hour)},
	} {
		b := encodeUser(u)
		got, err := decodeUser(u.ID, b)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != u.ID || got.Email != u.Email || got.PasswordHash != u.PasswordHash || !slices.Equal(got.Roles, u.Roles) ||
			!got.CreatedAt.Equal(u.CreatedAt) || got.Suspended != u.Suspended || !got.LastSeenAt.Equal(u.LastSeenAt) ||
			got.Handle != u.Handle || got.Name != u.Name {
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

// TestCreateUserHandles: an account registered without a handle gets one
// made from its e-mail, a number added while it is taken, and is named by
// it; a handle asked for is kept, lower-cased, unless another account has
// it: a conflict naming the field.
func TestCreateUserHandles(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	register := func(u *model.User) error {
		t.Helper()
		u.PasswordHash = fakePasswordHash
		_, err := db.CreateUser(ctx, u, tokenHash(u.Email), time.Hour, nil)
		return err
	}
	for _, tc := range []struct {
		email, handle, name  string
		wantHandle, wantName string
	}{
		{"Ada@example.com", "", "", "ada", "ada"},
		{"ada@example.org", "", "", "ada2", "ada2"},
		{"ada@example.net", "", "  Ada  Lovelace ", "ada3", "Ada  Lovelace"},
		{"lovelace@example.com", "ADA_L", "", "ada_l", "ada_l"},
		{"1@example.com", "", "", "user", "user"},
	} {
		u := &model.User{Email: tc.email, Handle: tc.handle, Name: tc.name}
		if err := register(u); err != nil {
			t.Fatalf("register %s: %v", tc.email, err)
		}
		got, err := db.UserByID(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Handle != tc.wantHandle || got.Name != tc.wantName || u.Handle != tc.wantHandle {
			t.Errorf("%s: stored handle %q name %q (returned %q), want %q and %q", tc.email, got.Handle, got.Name, u.Handle, tc.wantHandle, tc.wantName)
		}
	}
	err := register(&model.User{Email: "other@example.com", Handle: "Ada2"})
	var refusal *model.Error
	if !errors.Is(err, model.ErrConflict) || !errors.As(err, &refusal) || refusal.Field != "handle" {
		t.Fatalf("a taken handle: %v, want a conflict naming handle", err)
	}
	if _, err := db.UserByEmail(ctx, "other@example.com"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("the refused account exists: %v", err)
	}
	var invalid *model.ValidationError
	if err := register(&model.User{Email: "bad@example.com", Handle: "1bad"}); !errors.As(err, &invalid) || invalid.Violations[0].Field != "handle" {
		t.Errorf("a malformed handle: %v, want a violation of handle", err)
	}
}
