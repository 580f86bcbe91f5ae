package bolt

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// tokenIndexed reports whether hash has a record in tokens and an entry for
// userID in tokens_by_user.
func tokenIndexed(t *testing.T, db *testDB, userID uint64, hash model.TokenHash) (inTokens, inIndex bool) {
	t.Helper()
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		inTokens = tx.Bucket(bucketTokens).Get(hash[:]) != nil
		inIndex = tx.Bucket(bucketTokensByUser).Get(compositeKey(userID, hash[:])) != nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return inTokens, inIndex
}

func TestCreateToken(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		db := mustOpen(t)
		ada, regHash := mustCreateUser(t, db, "ada@example.com")
		db.Clock.Add(time.Minute)
		now := db.Clock.Now().Truncate(time.Microsecond)

		h := tokenHash("ada laptop")
		tok, err := db.CreateToken(ada.ID, h, 2*time.Hour)
		if err != nil {
			t.Fatalf("CreateToken = %v", err)
		}
		if got, want := tok.Hash, h; got != want {
			t.Errorf("Hash = %x, want %x", got, want)
		}
		if got, want := tok.UserID, ada.ID; got != want {
			t.Errorf("UserID = %d, want %d", got, want)
		}
		if got, want := tok.CreatedAt, now; !got.Equal(want) {
			t.Errorf("CreatedAt = %v, want %v", got, want)
		}
		if got, want := tok.ExpiresAt, now.Add(2*time.Hour); !got.Equal(want) {
			t.Errorf("ExpiresAt = %v, want %v", got, want)
		}
		// Both the new and the registration token work: one per device.
		for _, hh := range []model.TokenHash{regHash, h} {
			u, _, err := db.Authenticate(context.Background(), hh)
			if err != nil {
				t.Errorf("Authenticate(%x) = %v", hh[:4], err)
				continue
			}
			if got, want := u.ID, ada.ID; got != want {
				t.Errorf("Authenticate(%x) user = %d, want %d", hh[:4], got, want)
			}
		}
		if got, want := mustCounts(t, db), (Counts{Users: 1, Tokens: 2}); got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}
		checkIndexes(t, db.DB)
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		for _, id := range []uint64{0, ada.ID + 1} {
			tok, err := db.CreateToken(id, tokenHash("orphan"), time.Hour)
			if !errors.Is(err, model.ErrNotFound) {
				t.Errorf("CreateToken(user %d) = %v, want ErrNotFound", id, err)
			}
			if tok != nil {
				t.Errorf("CreateToken(user %d) token = %+v, want nil", id, tok)
			}
		}
		if got, want := mustCounts(t, db), (Counts{Users: 1, Tokens: 1}); got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}
		if _, _, err := db.Authenticate(context.Background(), tokenHash("orphan")); !errors.Is(err, model.ErrUnauthorized) {
			t.Errorf("Authenticate(refused token) = %v, want ErrUnauthorized", err)
		}
	})

	// The token CreateToken hands back (the login response's expiresAt) must
	// be the token the store keeps, at the precision the API shows.
	t.Run("ReturnedEqualsStored", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		h := tokenHash("odd ttl")
		const ttl = time.Hour + 1500*time.Nanosecond // e.g. HERALD_TOKEN_TTL=1h1.5µs
		tok, err := db.CreateToken(ada.ID, h, ttl)
		if err != nil {
			t.Fatal(err)
		}
		_, stored, err := db.Authenticate(context.Background(), h)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := tok.ExpiresAt, stored.ExpiresAt; !got.Equal(want) {
			t.Errorf("CreateToken ExpiresAt = %v, stored ExpiresAt = %v; want equal", got, want)
		}
		if got, want := tok.CreatedAt, stored.CreatedAt; !got.Equal(want) {
			t.Errorf("CreateToken CreatedAt = %v, stored CreatedAt = %v; want equal", got, want)
		}

		// model.Registration issues its token the same way.
		u := &model.User{Email: "bob@example.com", PasswordHash: fakePasswordHash}
		regHash := tokenHash("bob registration")
		regTok, err := db.CreateUser(context.Background(), u, regHash, ttl, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, stored, err = db.Authenticate(context.Background(), regHash)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := regTok.ExpiresAt, stored.ExpiresAt; !got.Equal(want) {
			t.Errorf("CreateUser token ExpiresAt = %v, stored ExpiresAt = %v; want equal", got, want)
		}
	})

	// A hash already held by another user must not leave tokens_by_user
	// pointing at a token that now belongs to someone else. Random 256-bit
	// tokens never collide, but the store promises its indexes can never
	// disagree with its records, whatever the caller passes.
	t.Run("HashOfAnotherUser", func(t *testing.T) {
		db := mustOpen(t)
		ada, _ := mustCreateUser(t, db, "ada@example.com")
		bob, _ := mustCreateUser(t, db, "bob@example.com")
		h := tokenHash("shared")
		if _, err := db.CreateToken(ada.ID, h, time.Hour); err != nil {
			t.Fatal(err)
		}
		_, err := db.CreateToken(bob.ID, h, time.Hour)
		if err != nil && !errors.Is(err, model.ErrConflict) {
			t.Errorf("CreateToken(bob, ada's hash) = %v, want nil or ErrConflict", err)
		}
		checkIndexes(t, db.DB)
		toks, err := db.Tokens(context.Background(), ada.ID)
		if err != nil {
			t.Errorf("Tokens(ada) = %v, want nil", err)
		}
		for _, tok := range toks {
			if tok.UserID != ada.ID {
				t.Errorf("Tokens(ada) lists a token of user %d", tok.UserID)
			}
		}
		// Revoking it must leave ada's listing working.
		if err := db.RevokeToken(context.Background(), h); err != nil {
			t.Fatalf("RevokeToken = %v", err)
		}
		if _, err := db.Tokens(context.Background(), ada.ID); err != nil {
			t.Errorf("Tokens(ada) after revoking the shared hash = %v, want nil", err)
		}
	})
}

func TestAuthenticate(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		db := mustOpen(t)
		ada, h := mustCreateUser(t, db, "Ada@Example.com")
		u, tok, err := db.Authenticate(context.Background(), h)
		if err != nil {
			t.Fatalf("Authenticate = %v", err)
		}
		if got, want := u.ID, ada.ID; got != want {
			t.Errorf("user ID = %d, want %d", got, want)
		}
		if got, want := u.Email, "Ada@Example.com"; got != want {
			t.Errorf("user Email = %q, want %q", got, want)
		}
		if got, want := u.HasRole(model.RoleUser), true; got != want {
			t.Errorf("HasRole(%q) = %v, want %v", model.RoleUser, got, want)
		}
		if got, want := tok.Hash, h; got != want {
			t.Errorf("token Hash = %x, want %x", got, want)
		}
		if got, want := tok.UserID, ada.ID; got != want {
			t.Errorf("token UserID = %d, want %d", got, want)
		}
	})

	t.Run("ErrUnauthorized", func(t *testing.T) {
		t.Run("Unknown", func(t *testing.T) {
			db := mustOpen(t)
			mustCreateUser(t, db, "ada@example.com")
			for _, h := range []model.TokenHash{{}, tokenHash("never issued")} {
				u, tok, err := db.Authenticate(context.Background(), h)
				if !errors.Is(err, model.ErrUnauthorized) {
					t.Errorf("Authenticate(%x) = %v, want ErrUnauthorized", h[:4], err)
				}
				if u != nil || tok != nil {
					t.Errorf("Authenticate(%x) = %v, %v, want nil, nil", h[:4], u, tok)
				}
			}
		})

		t.Run("Expired", func(t *testing.T) {
			db := mustOpen(t)
			ada, _ := mustCreateUser(t, db, "ada@example.com")
			h := tokenHash("short-lived")
			tok, err := db.CreateToken(ada.ID, h, time.Hour)
			if err != nil {
				t.Fatal(err)
			}

			// One microsecond (the stored precision) before expiry: fine.
			db.Clock.Set(tok.ExpiresAt.Add(-time.Microsecond))
			if _, _, err := db.Authenticate(context.Background(), h); err != nil {
				t.Errorf("Authenticate 1µs before ExpiresAt = %v, want nil", err)
			}
			// Sub-microsecond time before expiry is cut to the microsecond,
			// which still lies before ExpiresAt.
			db.Clock.Set(tok.ExpiresAt.Add(-time.Nanosecond))
			if _, _, err := db.Authenticate(context.Background(), h); err != nil {
				t.Errorf("Authenticate 1ns before ExpiresAt = %v, want nil", err)
			}
			// At exactly ExpiresAt the token is dead.
			db.Clock.Set(tok.ExpiresAt)
			u, got, err := db.Authenticate(context.Background(), h)
			if !errors.Is(err, model.ErrUnauthorized) {
				t.Errorf("Authenticate at ExpiresAt = %v, want ErrUnauthorized", err)
			}
			if u != nil || got != nil {
				t.Errorf("Authenticate at ExpiresAt = %v, %v, want nil, nil", u, got)
			}
			db.Clock.Set(tok.ExpiresAt.Add(24 * time.Hour))
			if _, _, err := db.Authenticate(context.Background(), h); !errors.Is(err, model.ErrUnauthorized) {
				t.Errorf("Authenticate a day after ExpiresAt = %v, want ErrUnauthorized", err)
			}
			// Expired tokens are refused, not deleted.
			if got, want := mustCounts(t, db).Tokens, 2; got != want {
				t.Errorf("Counts().Tokens = %d, want %d", got, want)
			}
		})

		t.Run("ZeroTTL", func(t *testing.T) {
			db := mustOpen(t)
			ada, _ := mustCreateUser(t, db, "ada@example.com")
			h := tokenHash("dead on arrival")
			if _, err := db.CreateToken(ada.ID, h, 0); err != nil {
				t.Fatal(err)
			}
			if _, _, err := db.Authenticate(context.Background(), h); !errors.Is(err, model.ErrUnauthorized) {
				t.Errorf("Authenticate(zero-TTL token) = %v, want ErrUnauthorized", err)
			}
		})

		t.Run("Revoked", func(t *testing.T) {
			db := mustOpen(t)
			_, h := mustCreateUser(t, db, "ada@example.com")
			if _, _, err := db.Authenticate(context.Background(), h); err != nil {
				t.Fatalf("Authenticate before revoke = %v", err)
			}
			if err := db.RevokeToken(context.Background(), h); err != nil {
				t.Fatalf("RevokeToken = %v", err)
			}
			if _, _, err := db.Authenticate(context.Background(), h); !errors.Is(err, model.ErrUnauthorized) {
				t.Errorf("Authenticate after revoke = %v, want ErrUnauthorized", err)
			}
		})
	})
}

func TestRevokeToken(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		db := mustOpen(t)
		ada, phone := mustCreateUser(t, db, "ada@example.com")
		laptop := tokenHash("laptop")
		if _, err := db.CreateToken(ada.ID, laptop, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := db.RevokeToken(context.Background(), phone); err != nil {
			t.Fatalf("RevokeToken = %v", err)
		}
		inTokens, inIndex := tokenIndexed(t, db, ada.ID, phone)
		if inTokens {
			t.Errorf("revoked token still in %s", bucketTokens)
		}
		if inIndex {
			t.Errorf("revoked token still in %s", bucketTokensByUser)
		}
		// The user's other device keeps working.
		if _, _, err := db.Authenticate(context.Background(), laptop); err != nil {
			t.Errorf("Authenticate(other token) = %v, want nil", err)
		}
		if inTokens, inIndex := tokenIndexed(t, db, ada.ID, laptop); !inTokens || !inIndex {
			t.Errorf("other token: in tokens %v, in index %v; want both", inTokens, inIndex)
		}
		if got, want := mustCounts(t, db), (Counts{Users: 1, Tokens: 1}); got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}
		checkIndexes(t, db.DB)
	})

	t.Run("ExpiredToken", func(t *testing.T) {
		db := mustOpen(t)
		_, h := mustCreateUser(t, db, "ada@example.com")
		db.Clock.Add(defaultTTL + time.Hour)
		if err := db.RevokeToken(context.Background(), h); err != nil {
			t.Errorf("RevokeToken(expired) = %v, want nil", err)
		}
		if got, want := mustCounts(t, db).Tokens, 0; got != want {
			t.Errorf("Counts().Tokens = %d, want %d", got, want)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		db := mustOpen(t)
		_, h := mustCreateUser(t, db, "ada@example.com")
		if err := db.RevokeToken(context.Background(), tokenHash("never issued")); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("RevokeToken(unknown) = %v, want ErrNotFound", err)
		}
		if err := db.RevokeToken(context.Background(), h); err != nil {
			t.Fatalf("first RevokeToken = %v", err)
		}
		if err := db.RevokeToken(context.Background(), h); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("second RevokeToken = %v, want ErrNotFound", err)
		}
		if got, want := mustCounts(t, db), (Counts{Users: 1}); got != want {
			t.Errorf("Counts() = %+v, want %+v", got, want)
		}
	})
}

func TestTokens(t *testing.T) {
	db := mustOpen(t)
	ada, adaReg := mustCreateUser(t, db, "ada@example.com")
	bob, bobReg := mustCreateUser(t, db, "bob@example.com")
	carol, carolReg := mustCreateUser(t, db, "carol@example.com")

	// One short-lived token, which will have expired: it is not listed.
	if _, err := db.CreateToken(ada.ID, tokenHash("ada kiosk"), time.Minute); err != nil {
		t.Fatal(err)
	}
	adaHashes := []model.TokenHash{adaReg}
	for _, device := range []string{"phone", "laptop", "tablet"} {
		h := tokenHash("ada " + device)
		db.Clock.Add(time.Second)
		if _, err := db.CreateToken(ada.ID, h, defaultTTL); err != nil {
			t.Fatal(err)
		}
		adaHashes = append([]model.TokenHash{h}, adaHashes...)
	}
	db.Clock.Add(time.Hour)
	if err := db.RevokeToken(context.Background(), carolReg); err != nil {
		t.Fatal(err)
	}

	hashesOf := func(toks []*model.Token, userID uint64) []model.TokenHash {
		t.Helper()
		var hs []model.TokenHash
		for _, tok := range toks {
			if tok.UserID != userID {
				t.Errorf("token %x listed for user %d belongs to %d", tok.Hash[:4], userID, tok.UserID)
			}
			hs = append(hs, tok.Hash)
		}
		return hs
	}

	t.Run("Several", func(t *testing.T) {
		toks, err := db.Tokens(context.Background(), ada.ID)
		if err != nil {
			t.Fatal(err)
		}
		got := hashesOf(toks, ada.ID)
		// Newest first, expired ones left out.
		if want := adaHashes; !slices.Equal(got, want) {
			t.Errorf("Tokens(ada) = %x, want %x", got, want)
		}
		for _, tok := range toks {
			if !tok.ExpiresAt.After(tok.CreatedAt) {
				t.Errorf("token %x: ExpiresAt %v not after CreatedAt %v", tok.Hash[:4], tok.ExpiresAt, tok.CreatedAt)
			}
		}
	})
	t.Run("One", func(t *testing.T) {
		toks, err := db.Tokens(context.Background(), bob.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := hashesOf(toks, bob.ID), []model.TokenHash{bobReg}; !slices.Equal(got, want) {
			t.Errorf("Tokens(bob) = %x, want %x", got, want)
		}
	})
	t.Run("NoneAfterRevoke", func(t *testing.T) {
		toks, err := db.Tokens(context.Background(), carol.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(toks), 0; got != want {
			t.Errorf("len(Tokens(carol)) = %d, want %d", got, want)
		}
	})
	t.Run("UnknownUser", func(t *testing.T) {
		toks, err := db.Tokens(context.Background(), 999)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(toks), 0; got != want {
			t.Errorf("len(Tokens(999)) = %d, want %d", got, want)
		}
	})
}

// A login checks the password outside any transaction; IssueLoginToken
// refuses when the password changed or the account went meanwhile.
func TestIssueLoginToken(t *testing.T) {
	db := mustOpen(t)
	ada, reg := mustCreateUser(t, db, "ada@example.com")
	if _, err := db.IssueLoginToken(context.Background(), ada.ID, fakePasswordHash, tokenHash("ok"), defaultTTL); err != nil {
		t.Fatalf("IssueLoginToken with the current hash = %v", err)
	}
	if err := db.ChangePassword(context.Background(), model.ByToken(reg), "$argon2id$new"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.IssueLoginToken(context.Background(), ada.ID, fakePasswordHash, tokenHash("stale"), defaultTTL); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("IssueLoginToken after a password change = %v, want ErrUnauthorized", err)
	}
	if err := db.DeleteAccount(context.Background(), model.ByToken(reg)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.IssueLoginToken(context.Background(), ada.ID, "$argon2id$new", tokenHash("gone"), defaultTTL); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("IssueLoginToken after deletion = %v, want ErrUnauthorized", err)
	}
	if got := mustCounts(t, db).Tokens; got != 0 {
		t.Errorf("tokens = %d, want 0", got)
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
