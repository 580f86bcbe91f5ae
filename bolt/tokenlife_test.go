package bolt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"herald/model"
)

func TestTokenIDs(t *testing.T) {
	db := mustOpen(t)
	ada, reg := mustCreateUser(t, db, "ada@example.com")
	seen := make(map[model.TokenID]bool)
	for i := range 20 {
		tok, err := db.CreateToken(ada.ID, tokenHash(fmt.Sprint("device ", i)), defaultTTL)
		if err != nil {
			t.Fatal(err)
		}
		if seen[tok.ID] {
			t.Errorf("token ID %s issued twice", tok.ID)
		}
		seen[tok.ID] = true
		if got, ok := model.ParseTokenID(tok.ID.String()); !ok || got != tok.ID {
			t.Errorf("ParseTokenID(%q) = %v, %v", tok.ID, got, ok)
		}
		// A handle is not a piece of the secret's hash.
		if string(tok.ID[:]) == string(tok.Hash[:len(tok.ID)]) {
			t.Errorf("token ID %s is the start of its hash", tok.ID)
		}
	}
	_, regTok, err := db.Authenticate(context.Background(), reg)
	if err != nil || regTok.ID == (model.TokenID{}) {
		t.Errorf("registration token ID = %v, %v; want a handle", regTok, err)
	}
	for _, bad := range []string{"", "abc", "0123456789abcdeF", "0123456789abcdeg", "0123456789abcdef0"} {
		if _, ok := model.ParseTokenID(bad); ok {
			t.Errorf("ParseTokenID(%q) ok, want refused", bad)
		}
	}
}

func TestTokenLimitPerUser(t *testing.T) {
	db := mustOpen(t)
	ada, reg := mustCreateUser(t, db, "ada@example.com")
	bob, bobReg := mustCreateUser(t, db, "bob@example.com")
	hashes := []model.TokenHash{reg}
	for i := range model.MaxTokensPerUser + 4 {
		db.Clock.Add(time.Second)
		h := tokenHash(fmt.Sprint("login ", i))
		if _, err := db.CreateToken(ada.ID, h, defaultTTL); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	toks, err := db.Tokens(context.Background(), ada.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(toks), model.MaxTokensPerUser; got != want {
		t.Errorf("ada holds %d tokens, want %d", got, want)
	}
	// The five oldest (registration first) were dropped, the newest kept.
	for i, h := range hashes {
		_, _, err := db.Authenticate(context.Background(), h)
		if dropped := i < 5; dropped != errors.Is(err, model.ErrUnauthorized) {
			t.Errorf("token %d of %d: Authenticate = %v, dropped = %v", i, len(hashes), err, dropped)
		}
	}
	// Another user's tokens are untouched.
	if _, _, err := db.Authenticate(context.Background(), bobReg); err != nil {
		t.Errorf("bob's token after ada's logins: %v", err)
	}
	_ = bob
}

func TestTokenLastUsed(t *testing.T) {
	db := mustOpen(t)
	ada, reg := mustCreateUser(t, db, "ada@example.com")
	created := db.Clock.Now().Truncate(time.Microsecond)
	lastUsed := func() time.Time {
		t.Helper()
		toks, err := db.Tokens(context.Background(), ada.ID)
		if err != nil || len(toks) != 1 {
			t.Fatalf("Tokens = %v, %v", toks, err)
		}
		return toks[0].LastUsedAt
	}
	if got := lastUsed(); !got.Equal(created) {
		t.Errorf("LastUsedAt of a new token = %v, want its creation %v", got, created)
	}
	// Uses within the granularity write nothing.
	db.Clock.Add(model.TokenUseGranularity / 2)
	for range 100 {
		if _, _, err := db.Authenticate(context.Background(), reg); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := db.FlushTokenUses(context.Background()); err != nil || n != 0 {
		t.Errorf("FlushTokenUses after fresh uses = %d, %v; want 0", n, err)
	}
	// A use after it is noted once, shown at once, and written by one flush.
	db.Clock.Add(model.TokenUseGranularity)
	commits := db.WriteStats().Commits
	for range 100 {
		if _, _, err := db.Authenticate(context.Background(), reg); err != nil {
			t.Fatal(err)
		}
	}
	if got := db.WriteStats().Commits; got != commits {
		t.Errorf("100 reads made %d commits, want none", got-commits)
	}
	want := db.Clock.Now().Truncate(time.Microsecond)
	if got := lastUsed(); !got.Equal(want) {
		t.Errorf("LastUsedAt before the flush = %v, want %v", got, want)
	}
	if n, err := db.FlushTokenUses(context.Background()); err != nil || n != 1 {
		t.Errorf("FlushTokenUses = %d, %v; want 1", n, err)
	}
	if got := db.WriteStats().Commits; got != commits+1 {
		t.Errorf("flush made %d commits, want 1", got-commits)
	}
	if got := lastUsed(); !got.Equal(want) {
		t.Errorf("LastUsedAt after the flush = %v, want %v", got, want)
	}
	// A token revoked before the flush is not brought back.
	db.Clock.Add(model.TokenUseGranularity)
	if _, _, err := db.Authenticate(context.Background(), reg); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeToken(context.Background(), reg); err != nil {
		t.Fatal(err)
	}
	if n, err := db.FlushTokenUses(context.Background()); err != nil || n != 0 {
		t.Errorf("FlushTokenUses of a revoked token = %d, %v; want 0", n, err)
	}
	if c := mustCounts(t, db); c.Tokens != 0 {
		t.Errorf("tokens after revoke and flush = %d, want 0", c.Tokens)
	}
}

func TestRevokeTokenByID(t *testing.T) {
	db := mustOpen(t)
	ada, adaReg := mustCreateUser(t, db, "ada@example.com")
	_, bobReg := mustCreateUser(t, db, "bob@example.com")
	phone, err := db.CreateToken(ada.ID, tokenHash("phone"), defaultTTL)
	if err != nil {
		t.Fatal(err)
	}
	_, bobTok, err := db.Authenticate(context.Background(), bobReg)
	if err != nil {
		t.Fatal(err)
	}
	// Another user's handle is as unknown as a made-up one.
	for _, id := range []model.TokenID{bobTok.ID, {1, 2, 3}} {
		if err := db.RevokeTokenByID(context.Background(), model.ByToken(adaReg), id); !errors.Is(err, model.ErrNotFound) {
			t.Errorf("RevokeTokenByID(%s) = %v, want ErrNotFound", id, err)
		}
	}
	if _, _, err := db.Authenticate(context.Background(), bobReg); err != nil {
		t.Errorf("bob's token after ada tried to revoke it: %v", err)
	}
	if err := db.RevokeTokenByID(context.Background(), model.ByToken(adaReg), phone.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Authenticate(context.Background(), phone.Hash); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("revoked phone token: Authenticate = %v, want ErrUnauthorized", err)
	}
	if _, _, err := db.Authenticate(context.Background(), adaReg); err != nil {
		t.Errorf("the token that revoked another: %v", err)
	}
	// The presented token can revoke itself, and then can do nothing more.
	_, self, _ := db.Authenticate(context.Background(), adaReg)
	if err := db.RevokeTokenByID(context.Background(), model.ByToken(adaReg), self.ID); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeTokenByID(context.Background(), model.ByToken(adaReg), self.ID); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("revoking with a revoked token = %v, want ErrUnauthorized", err)
	}
}

func TestRevokeAllTokens(t *testing.T) {
	db := mustOpen(t)
	ada, adaReg := mustCreateUser(t, db, "ada@example.com")
	_, bobReg := mustCreateUser(t, db, "bob@example.com")
	var all []model.TokenHash
	for i := range 3 {
		h := tokenHash(fmt.Sprint("ada device ", i))
		if _, err := db.CreateToken(ada.ID, h, defaultTTL); err != nil {
			t.Fatal(err)
		}
		all = append(all, h)
	}
	if err := db.RevokeAllTokens(context.Background(), model.ByToken(all[0])); err != nil {
		t.Fatal(err)
	}
	for _, h := range append(all, adaReg) {
		if _, _, err := db.Authenticate(context.Background(), h); !errors.Is(err, model.ErrUnauthorized) {
			t.Errorf("after logging out everywhere: Authenticate = %v, want ErrUnauthorized", err)
		}
	}
	if _, _, err := db.Authenticate(context.Background(), bobReg); err != nil {
		t.Errorf("bob's token after ada logged out everywhere: %v", err)
	}
}

func TestSweepExpiredTokens(t *testing.T) {
	db := mustOpen(t)
	// More than two sweep transactions' worth, spread over enough users
	// that none reaches model.MaxTokensPerUser.
	var users []uint64
	for i := range 30 {
		u, _ := mustCreateUser(t, db, fmt.Sprintf("user%d@example.com", i))
		users = append(users, u.ID)
	}
	ada := &model.User{ID: users[0]}
	var keep []model.TokenHash
	for i := range 2*sweepChunk + 7 {
		owner := users[i%len(users)]
		ttl := time.Minute
		if i%3 == 0 {
			ttl = defaultTTL
		}
		h := tokenHash(fmt.Sprint("token ", i))
		withoutSync(t, db, func() {
			if _, err := db.CreateToken(owner, h, ttl); err != nil {
				t.Fatal(err)
			}
		})
		if ttl == defaultTTL {
			keep = append(keep, h)
		}
	}
	db.Clock.Add(time.Hour)
	before := mustCounts(t, db).Tokens
	n, err := db.SweepExpiredTokens(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	after := mustCounts(t, db).Tokens
	if got, want := after, len(keep)+len(users); got != want { // + the registration tokens
		t.Errorf("tokens after the sweep = %d, want %d", got, want)
	}
	if got, want := n, before-after; got != want {
		t.Errorf("SweepExpiredTokens = %d, want %d", got, want)
	}
	for _, h := range keep {
		if _, _, err := db.Authenticate(context.Background(), h); err != nil {
			t.Errorf("a live token after the sweep: %v", err)
		}
	}
	if n, _ := db.SweepExpiredTokens(context.Background()); n != 0 {
		t.Errorf("second sweep deleted %d, want 0", n)
	}
	toks, _ := db.Tokens(context.Background(), ada.ID)
	if slices.ContainsFunc(toks, func(t *model.Token) bool { return !t.ExpiresAt.After(db.Clock.Now()) }) {
		t.Errorf("an expired token is still listed")
	}
}

// TestRevocationsInChangeLog: every way a token stops working before its
// time records, in the transaction that deletes it, that its account lost
// tokens: the log is how live streams, in any process, hear of it. A
// refused revocation records nothing, and neither does the sweep of
// expired tokens, which streams notice by themselves.
func TestRevocationsInChangeLog(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	ada, adaReg := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	last, _, _ := db.ChangeHead(ctx)
	// take returns the accounts of the revocations logged since the last
	// call, failing on any other change.
	take := func() []uint64 {
		t.Helper()
		chs, head, err := db.ChangesAfter(ctx, last, 1000)
		if err != nil {
			t.Fatal(err)
		}
		last = head
		var got []uint64
		for _, ch := range chs {
			if ch.Kind != model.TokensRevoked || ch.UserID == 0 {
				t.Fatalf("change %d: %v of account %d; want only revocations", ch.Seq, ch.Kind, ch.UserID)
			}
			got = append(got, ch.UserID)
		}
		return got
	}
	if err := db.RevokeAllTokens(ctx, model.ByUser(bob.ID)); err != nil {
		t.Fatal(err)
	}
	if err := db.RevokeTokenByID(ctx, model.ByUser(ada.ID), model.TokenID{}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("revoking an unknown handle = %v", err)
	}
	if got := take(); !slices.Equal(got, []uint64{bob.ID}) {
		t.Fatalf("logged revocations of %v; want bob's alone, not the refused one", got)
	}

	for _, tc := range []struct {
		name   string
		delete func()
		want   int // revocations logged
	}{
		{"logout", func() {
			if err := db.RevokeToken(ctx, adaReg); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"sign out everywhere", func() {
			for _, device := range []string{"phone", "laptop"} {
				if _, err := db.CreateToken(ada.ID, tokenHash(device), defaultTTL); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.RevokeAllTokens(ctx, model.ByUser(ada.ID)); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"the per-user cap", func() {
			for i := range model.MaxTokensPerUser + 2 {
				if _, err := db.CreateToken(ada.ID, tokenHash(fmt.Sprint("cap ", i)), defaultTTL); err != nil {
					t.Fatal(err)
				}
			}
		}, 2},
		{"the sweep of expired tokens", func() {
			db.Clock.Add(defaultTTL)
			if n, err := db.SweepExpiredTokens(ctx); err != nil || n == 0 {
				t.Fatalf("sweep = %d, %v", n, err)
			}
		}, 0},
		{"account deletion", func() {
			if _, err := db.CreateToken(ada.ID, tokenHash("last"), defaultTTL); err != nil {
				t.Fatal(err)
			}
			if err := db.DeleteAccount(ctx, model.ByUser(ada.ID)); err != nil {
				t.Fatal(err)
			}
		}, 1},
	} {
		tc.delete()
		got := take()
		if len(got) != tc.want || slices.ContainsFunc(got, func(id uint64) bool { return id != ada.ID }) {
			t.Errorf("%s: logged revocations of %v, want %d of ada (%d)", tc.name, got, tc.want, ada.ID)
		}
	}
}
