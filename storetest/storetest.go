// Package storetest is the conformance suite every Herald store passes:
// the same cases, run against bbolt in a temporary file and against
// PostgreSQL in a throwaway cluster, so that the HTTP layer, which speaks
// to either through the interfaces it declares, cannot tell them apart.
// It covers accounts, tokens, messages, preconditions, ownership, search,
// the change log, retention and deletion.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/chores"
	heraldhttp "herald/http"
	"herald/model"
	"herald/push"
)

// Store is what the suite asks of a store: everything the HTTP layer
// declares, what every store does for the chores, CreateAdministrator,
// as herald admin makes one, HasAdministrator, which the startup's log
// asks, and UserByID, with which the suite reads accounts back.
type Store interface {
	heraldhttp.Store
	chores.Store
	push.Store
	UserByID(ctx context.Context, id uint64) (*model.User, error)
	CreateAdministrator(ctx context.Context, u *model.User) error
	// What HTTPS with ACME keeps: see certs.go.
	Cert(ctx context.Context, name string) ([]byte, error)
	PutCert(ctx context.Context, name string, data []byte) error
	DeleteCert(ctx context.Context, name string) error
	HasAdministrator(ctx context.Context) (bool, error)
}

// Counts is how many records of each kind a store holds.
type Counts struct{ Users, Tokens, Messages int }

// Opened is a store under test, with the things stores do not offer
// alike: their counts and a copy of all they hold.
type Opened struct {
	Store  Store
	Counts func(ctx context.Context) (Counts, error)
	// Copy returns the bytes of a copy of everything the store holds, as
	// an operator's copy would hold them: a compacted copy of a bbolt
	// file, the rows of a PostgreSQL dump.
	Copy func(ctx context.Context) ([]byte, error)
	// IdempotencyRecords returns every stored idempotency record as the
	// store holds it: a bbolt record's key and value, a PostgreSQL row's
	// columns as the server sends them.
	IdempotencyRecords func(ctx context.Context) ([][]byte, error)
}

// Opener opens a fresh, empty store whose clock is now, closed at t's
// cleanup.
type Opener func(t *testing.T, now func() time.Time) Opened

// Clock is a settable clock, shared by a store and its test.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Epoch is where every test's clock starts.
var Epoch = time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.UTC)

// NewClock returns a clock at Epoch.
func NewClock() *Clock { return &Clock{now: Epoch} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// env is one test's store and clock.
type env struct {
	t *testing.T
	Opened
	clock *Clock
}

func (e *env) ctx() context.Context { return context.Background() }

// Run runs the suite against the stores open makes.
func Run(t *testing.T, open Opener) {
	cases := []struct {
		name string
		run  func(e *env)
	}{
		{"Accounts", testAccounts},
		{"HasAdministrator", testHasAdministrator},
		{"LookAlikes", testLookAlikes},
		{"LookAlikeRace", testLookAlikeRace},
		{"Handles", testHandles},
		{"HandleRace", testHandleRace},
		{"Profiles", testProfiles},
		{"Threads", testThreads},
		{"RepliesWhileWriting", testRepliesWhileWriting},
		{"Mentions", testMentions},
		{"MentionsAfterRename", testMentionsAfterRename},
		{"Notifications", testNotifications},
		{"NotificationCap", testNotificationCap},
		{"NotificationsWhileWriting", testNotificationsWhileWriting},
		{"PasswordHash", testPasswordHash},
		{"Tokens", testTokens},
		{"TokenCap", testTokenCap},
		{"TokenLastUsed", testTokenLastUsed},
		{"Revocations", testRevocations},
		{"ReadsAfterTheAccountChanges", testReadsAfterTheAccountChanges},
		{"Messages", testMessages},
		{"Ownership", testOwnership},
		{"Preconditions", testPreconditions},
		{"LogoutWhileWriting", testLogoutWhileWriting},
		{"ChangeLog", testChangeLog},
		{"ChangeLogKeepsNothingGone", testChangeLogKeepsNothingGone},
		{"ChangesAsCommitted", testChangesAsCommitted},
		{"ChangesBoundedByBytes", testChangesBoundedByBytes},
		{"ChangeHeadWakes", testChangeHeadWakes},
		{"TrimChanges", testTrimChanges},
		{"Chores", testChores},
		{"ConcurrentWrites", testConcurrentWrites},
		{"DeleteAccount", testDeleteAccount},
		{"Retention", testRetention},
		{"Search", testSearch},
		{"SearchAgainstModel", testSearchAgainstModel},
		{"SearchWhileWriting", testSearchWhileWriting},
		{"Administration", testAdministration},
		{"LastAdministratorRace", testLastAdministratorRace},
		{"Invites", testInvites},
		{"PasswordResets", testPasswordResets},
		{"LastSeen", testLastSeen},
		{"Idempotency", testIdempotency},
		{"Certs", testCerts},
		{"Settings", testSettings},
		{"PushKeys", testPushKeys},
		{"PushSubscriptions", testPushSubscriptions},
		{"PushQueue", testPushQueue},
		{"PushClaimsApart", testPushClaimsApart},
		{"PushClaimSkipsBusy", testPushClaimSkipsBusy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := NewClock()
			e := &env{t: t, Opened: open(t, clock.Now), clock: clock}
			c.run(e)
		})
	}
}

// TokenHash is the hash of a made-up token named name.
func TokenHash(name string) model.TokenHash { return sha256.Sum256([]byte(name)) }

// FakePasswordHash stands in for an argon2id string; stores never look
// inside it.
const FakePasswordHash = "$argon2id$v=19$m=65536,t=1,p=4$c2FsdA$aGFzaA"

const ttl = 30 * 24 * time.Hour

// user registers email and returns the account and its first token.
func (e *env) user(email string) (*model.User, model.TokenHash) {
	e.t.Helper()
	u := &model.User{Email: email, PasswordHash: FakePasswordHash}
	h := TokenHash("register:" + email)
	if _, err := e.Store.CreateUser(e.ctx(), u, h, ttl, nil); err != nil {
		e.t.Fatalf("CreateUser(%q) = %v", email, err)
	}
	return u, h
}

// login issues another token to u.
func (e *env) login(u *model.User, name string) model.TokenHash {
	e.t.Helper()
	h := TokenHash(name)
	if _, err := e.Store.IssueLoginToken(e.ctx(), u.ID, u.PasswordHash, h, ttl); err != nil {
		e.t.Fatalf("IssueLoginToken(%d, %q) = %v", u.ID, name, err)
	}
	return h
}

// post stores content for owner.
func (e *env) post(owner uint64, content string) *model.Message {
	e.t.Helper()
	m, err := e.Store.CreateMessage(e.ctx(), model.ByUser(owner), content)
	if err != nil {
		e.t.Fatalf("CreateMessage(%q) = %v", content, err)
	}
	return m
}

func (e *env) counts() Counts {
	e.t.Helper()
	c, err := e.Counts(e.ctx())
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// wantKind fails unless err is an *model.Error of kind with detail (a
// detail of "" is not checked).
func wantKind(tb testing.TB, what string, err, kind error, detail string) {
	tb.Helper()
	if !errors.Is(err, kind) {
		tb.Fatalf("%s = %v, want %v", what, err, kind)
	}
	var me *model.Error
	if detail != "" && (!errors.As(err, &me) || me.Detail != detail) {
		tb.Errorf("%s: detail %q, want %q", what, err.Error(), detail)
	}
}

func ptr[T any](v T) *T { return &v }

func testAccounts(e *env) {
	t := e.t
	ctx := e.ctx()
	u := &model.User{Email: "  Ada@Example.com ", PasswordHash: FakePasswordHash}
	tok, err := e.Store.CreateUser(ctx, u, TokenHash("ada"), ttl, nil)
	if err != nil {
		t.Fatal(err)
	}
	if u.ID == 0 || u.Email != "Ada@Example.com" || !slices.Equal(u.Roles, []string{model.RoleUser}) || !u.CreatedAt.Equal(e.clock.Now().Truncate(time.Microsecond)) {
		t.Errorf("created user = %+v", u)
	}
	if tok.UserID != u.ID || tok.Hash != TokenHash("ada") || !tok.ExpiresAt.Equal(model.TokenExpiry(u.CreatedAt, ttl)) || tok.ID == (model.TokenID{}) {
		t.Errorf("first token = %+v", tok)
	}
	for _, email := range []string{"ada@example.com", "ADA@EXAMPLE.COM", " ada@example.com"} {
		got, err := e.Store.UserByEmail(ctx, email)
		if err != nil || got.ID != u.ID || got.Email != u.Email || got.PasswordHash != FakePasswordHash || !got.CreatedAt.Equal(u.CreatedAt) {
			t.Errorf("UserByEmail(%q) = %+v, %v", email, got, err)
		}
	}
	_, err = e.Store.UserByEmail(ctx, "nobody@example.com")
	wantKind(t, "UserByEmail(unknown)", err, model.ErrNotFound, "no account has this e-mail")
	got, err := e.Store.UserByID(ctx, u.ID)
	if err != nil || got.Email != u.Email {
		t.Errorf("UserByID = %+v, %v", got, err)
	}
	_, err = e.Store.UserByID(ctx, 999)
	wantKind(t, "UserByID(999)", err, model.ErrNotFound, "account 999 does not exist")

	before := e.counts()
	for _, email := range []string{"ada@example.com", "ADA@example.COM"} {
		_, err := e.Store.CreateUser(ctx, &model.User{Email: email, PasswordHash: FakePasswordHash}, TokenHash("dup "+email), ttl, nil)
		wantKind(t, "CreateUser(taken "+email+")", err, model.ErrConflict, "the e-mail "+email+" is already registered")
	}
	// One address in two normalisation forms is one account.
	cafe, _ := e.user("cafe\u0301@example.com")
	_, err = e.Store.CreateUser(ctx, &model.User{Email: "caf\u00e9@example.com", PasswordHash: FakePasswordHash}, TokenHash("nfc"), ttl, nil)
	wantKind(t, "CreateUser(NFC of an NFD address)", err, model.ErrConflict, "")
	_, err = e.Store.CreateUser(ctx, &model.User{Email: "not an address", PasswordHash: FakePasswordHash}, TokenHash("bad"), ttl, nil)
	wantKind(t, "CreateUser(bad e-mail)", err, model.ErrInvalid, "")
	// Registrations refused for a taken address take no account ID.
	if fay, _ := e.user("fay@example.com"); fay.ID != cafe.ID+1 {
		t.Errorf("the account after refused registrations has ID %d, want %d", fay.ID, cafe.ID+1)
	}
	// A token hash already issued is refused, and nothing is stored.
	_, err = e.Store.CreateUser(ctx, &model.User{Email: "eve@example.com", PasswordHash: FakePasswordHash}, TokenHash("ada"), ttl, nil)
	wantKind(t, "CreateUser(issued token)", err, model.ErrConflict, "this token was already issued")
	if got, want := e.counts(), (Counts{before.Users + 2, before.Tokens + 2, before.Messages}); got != want {
		t.Errorf("counts after refused registrations = %+v, want %+v", got, want)
	}
	if _, err := e.Store.UserByEmail(ctx, "eve@example.com"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("an account whose registration failed exists: %v", err)
	}
	if err := e.Store.Ping(ctx); err != nil {
		t.Errorf("Ping = %v", err)
	}
}

func testPasswordHash(e *env) {
	t := e.t
	ctx := e.ctx()
	u, _ := e.user("ada@example.com")
	if err := e.Store.SetPasswordHash(ctx, u.ID, "not the hash", "new"); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.Store.UserByID(ctx, u.ID); got.PasswordHash != FakePasswordHash {
		t.Errorf("a stale SetPasswordHash changed the hash to %q", got.PasswordHash)
	}
	if err := e.Store.SetPasswordHash(ctx, u.ID, FakePasswordHash, "rehashed"); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.Store.UserByID(ctx, u.ID); got.PasswordHash != "rehashed" {
		t.Errorf("hash after SetPasswordHash = %q", got.PasswordHash)
	}
	err := e.Store.SetPasswordHash(ctx, 999, "x", "y")
	wantKind(t, "SetPasswordHash(unknown)", err, model.ErrNotFound, "")
	// A login checked against the old hash gets nothing.
	_, err = e.Store.IssueLoginToken(ctx, u.ID, FakePasswordHash, TokenHash("late"), ttl)
	wantKind(t, "IssueLoginToken(stale hash)", err, model.ErrUnauthorized, "e-mail or password is incorrect")
	_, err = e.Store.IssueLoginToken(ctx, 999, "x", TokenHash("gone"), ttl)
	wantKind(t, "IssueLoginToken(no account)", err, model.ErrUnauthorized, "e-mail or password is incorrect")
	if _, err := e.Store.IssueLoginToken(ctx, u.ID, "rehashed", TokenHash("fresh"), ttl); err != nil {
		t.Errorf("IssueLoginToken(current hash) = %v", err)
	}
}

func testTokens(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, reg := e.user("ada@example.com")
	bob, bobReg := e.user("bob@example.com")
	got, tok, err := e.Store.Authenticate(ctx, reg)
	if err != nil || got.ID != ada.ID || got.Email != ada.Email || tok.UserID != ada.ID || tok.Hash != reg {
		t.Fatalf("Authenticate = %+v, %+v, %v", got, tok, err)
	}
	_, _, err = e.Store.Authenticate(ctx, TokenHash("never issued"))
	wantKind(t, "Authenticate(unknown)", err, model.ErrUnauthorized, "the bearer token is unknown or was revoked")

	e.clock.Add(time.Second)
	phone := e.login(ada, "phone")
	e.clock.Add(time.Second)
	laptop := e.login(ada, "laptop")
	toks, err := e.Store.Tokens(ctx, ada.ID)
	if err != nil {
		t.Fatal(err)
	}
	var hashes []model.TokenHash
	for _, tk := range toks {
		hashes = append(hashes, tk.Hash)
	}
	if want := []model.TokenHash{laptop, phone, reg}; !slices.Equal(hashes, want) {
		t.Errorf("Tokens newest first = %x, want %x", hashes, want)
	}

	// Revoking by handle: only the caller's own.
	bobToks, _ := e.Store.Tokens(ctx, bob.ID)
	err = e.Store.RevokeTokenByID(ctx, model.ByToken(reg), bobToks[0].ID)
	wantKind(t, "RevokeTokenByID(another's)", err, model.ErrNotFound, "you hold no token "+bobToks[0].ID.String())
	if err := e.Store.RevokeTokenByID(ctx, model.ByToken(reg), toks[1].ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Store.Authenticate(ctx, phone); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("a token revoked by handle still works: %v", err)
	}
	if err := e.Store.RevokeToken(ctx, laptop); err != nil {
		t.Fatal(err)
	}
	err = e.Store.RevokeToken(ctx, laptop)
	wantKind(t, "RevokeToken(twice)", err, model.ErrNotFound, "the token does not exist")

	// A password change keeps the token that made it and ends the others.
	tablet := e.login(ada, "tablet")
	if err := e.Store.ChangePassword(ctx, model.ByToken(reg), "new hash"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Store.Authenticate(ctx, reg); err != nil {
		t.Errorf("the token that changed the password stopped working: %v", err)
	}
	if _, _, err := e.Store.Authenticate(ctx, tablet); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("another token survived a password change: %v", err)
	}
	if u, _ := e.Store.UserByID(ctx, ada.ID); u.PasswordHash != "new hash" {
		t.Errorf("hash after ChangePassword = %q", u.PasswordHash)
	}
	// Everywhere: the presented token too, and nobody else's.
	if err := e.Store.RevokeAllTokens(ctx, model.ByToken(reg)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Store.Authenticate(ctx, reg); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("log out everywhere left the presented token working: %v", err)
	}
	if _, _, err := e.Store.Authenticate(ctx, bobReg); err != nil {
		t.Errorf("bob's token after ada logged out everywhere: %v", err)
	}
	err = e.Store.RevokeAllTokens(ctx, model.ByToken(reg))
	wantKind(t, "RevokeAllTokens(revoked token)", err, model.ErrUnauthorized, "")
	err = e.Store.ChangePassword(ctx, model.ByServer(), "x")
	wantKind(t, "ChangePassword(ByServer)", err, model.ErrUnauthorized, "this needs an account")

	// Expiry: refused at its instant, listed no more, swept without a
	// revocation in the change log.
	head, _, _ := e.Store.ChangeHead(ctx)
	e.clock.Add(ttl)
	_, _, err = e.Store.Authenticate(ctx, bobReg)
	wantKind(t, "Authenticate(expired)", err, model.ErrUnauthorized, "the bearer token has expired; log in again")
	if toks, err := e.Store.Tokens(ctx, bob.ID); err != nil || len(toks) != 0 {
		t.Errorf("Tokens after expiry = %v, %v", toks, err)
	}
	if n, err := e.Store.SweepExpiredTokens(ctx); err != nil || n != 1 {
		t.Errorf("SweepExpiredTokens = %d, %v; want 1", n, err)
	}
	if got := e.counts().Tokens; got != 0 {
		t.Errorf("tokens after the sweep = %d", got)
	}
	if after, _, _ := e.Store.ChangeHead(ctx); after != head {
		t.Errorf("the sweep logged %d changes, want none", after-head)
	}
}

func testTokenCap(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, reg := e.user("ada@example.com")
	_, bobReg := e.user("bob@example.com")
	hashes := []model.TokenHash{reg}
	for i := range model.MaxTokensPerUser + 4 {
		e.clock.Add(time.Second)
		hashes = append(hashes, e.login(ada, fmt.Sprint("login ", i)))
	}
	toks, err := e.Store.Tokens(ctx, ada.ID)
	if err != nil || len(toks) != model.MaxTokensPerUser {
		t.Fatalf("ada holds %d tokens (%v), want %d", len(toks), err, model.MaxTokensPerUser)
	}
	for i, h := range hashes {
		_, _, err := e.Store.Authenticate(ctx, h)
		if dropped := i < 5; dropped != errors.Is(err, model.ErrUnauthorized) {
			t.Errorf("token %d: Authenticate = %v, want dropped = %v", i, err, dropped)
		}
	}
	if _, _, err := e.Store.Authenticate(ctx, bobReg); err != nil {
		t.Errorf("bob's token after ada's logins: %v", err)
	}
}

func testTokenLastUsed(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, reg := e.user("ada@example.com")
	created := e.clock.Now().Truncate(time.Microsecond)
	lastUsed := func() time.Time {
		t.Helper()
		toks, err := e.Store.Tokens(ctx, ada.ID)
		if err != nil || len(toks) != 1 {
			t.Fatalf("Tokens = %v, %v", toks, err)
		}
		return toks[0].LastUsedAt
	}
	if got := lastUsed(); !got.Equal(created) {
		t.Errorf("LastUsedAt of a new token = %v, want %v", got, created)
	}
	e.clock.Add(model.TokenUseGranularity / 2)
	for range 20 {
		if _, _, err := e.Store.Authenticate(ctx, reg); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.Store.FlushTokenUses(ctx); err != nil || n != 0 {
		t.Errorf("FlushTokenUses after fresh uses = %d, %v; want 0", n, err)
	}
	e.clock.Add(model.TokenUseGranularity)
	for range 20 {
		if _, _, err := e.Store.Authenticate(ctx, reg); err != nil {
			t.Fatal(err)
		}
	}
	want := e.clock.Now().Truncate(time.Microsecond)
	if got := lastUsed(); !got.Equal(want) {
		t.Errorf("LastUsedAt before the flush = %v, want %v", got, want)
	}
	if n, err := e.Store.FlushTokenUses(ctx); err != nil || n != 1 {
		t.Errorf("FlushTokenUses = %d, %v; want 1", n, err)
	}
	if got := lastUsed(); !got.Equal(want) {
		t.Errorf("LastUsedAt after the flush = %v, want %v", got, want)
	}
	// A token revoked before the flush is not brought back.
	e.clock.Add(model.TokenUseGranularity)
	if _, _, err := e.Store.Authenticate(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.RevokeToken(ctx, reg); err != nil {
		t.Fatal(err)
	}
	if n, err := e.Store.FlushTokenUses(ctx); err != nil || n != 0 {
		t.Errorf("FlushTokenUses of a revoked token = %d, %v; want 0", n, err)
	}
	if c := e.counts(); c.Tokens != 0 {
		t.Errorf("tokens after revoke and flush = %d", c.Tokens)
	}
}

// changes reads the log after position after, failing on error.
func (e *env) changes(after uint64) []*model.Change {
	e.t.Helper()
	chs, _, err := e.Store.ChangesAfter(e.ctx(), after, 100000)
	if err != nil {
		e.t.Fatalf("ChangesAfter(%d) = %v", after, err)
	}
	return chs
}

// ChangeString renders what a reader of the log sees of a change.
func ChangeString(ch *model.Change) string {
	switch ch.Kind {
	case model.TokensRevoked:
		return fmt.Sprintf("%d %s of account %d", ch.Seq, ch.Kind, ch.UserID)
	case model.SettingsChanged:
		return fmt.Sprintf("%d %s", ch.Seq, ch.Kind)
	}
	m := ch.Message
	s := fmt.Sprintf("%d %s #%d of %d %s %q r%d %s %s", ch.Seq, ch.Kind, m.ID, m.OwnerID, m.OwnerEmail, m.Content, m.Revision,
		m.CreatedAt.Format(time.RFC3339Nano), m.UpdatedAt.Format(time.RFC3339Nano))
	if ch.Scrubbed {
		s += " scrubbed"
	}
	if ch.Gone {
		s += " gone"
	}
	return s
}

func changeStrings(chs []*model.Change) []string {
	out := make([]string, len(chs))
	for i, ch := range chs {
		out[i] = ChangeString(ch)
	}
	return out
}

func testRevocations(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, adaReg := e.user("ada@example.com")
	bob, _ := e.user("bob@example.com")
	last, _, _ := e.Store.ChangeHead(ctx)
	take := func() []uint64 {
		t.Helper()
		chs, head, err := e.Store.ChangesAfter(ctx, last, 1000)
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
	if err := e.Store.RevokeAllTokens(ctx, model.ByUser(bob.ID)); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.RevokeTokenByID(ctx, model.ByUser(ada.ID), model.TokenID{}); !errors.Is(err, model.ErrNotFound) {
		t.Fatalf("revoking an unknown handle = %v", err)
	}
	if got := take(); !slices.Equal(got, []uint64{bob.ID}) {
		t.Fatalf("logged revocations of %v; want bob's alone", got)
	}
	for _, tc := range []struct {
		name string
		act  func()
		want int
	}{
		{"logout", func() {
			if err := e.Store.RevokeToken(ctx, adaReg); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"sign out everywhere", func() {
			e.login(ada, "phone")
			e.login(ada, "laptop")
			if err := e.Store.RevokeAllTokens(ctx, model.ByUser(ada.ID)); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"the per-user cap", func() {
			for i := range model.MaxTokensPerUser + 2 {
				e.clock.Add(time.Millisecond)
				e.login(ada, fmt.Sprint("cap ", i))
			}
		}, 2},
		{"password change", func() {
			if err := e.Store.ChangePassword(ctx, model.ByToken(TokenHash(fmt.Sprint("cap ", model.MaxTokensPerUser+1))), FakePasswordHash); err != nil {
				t.Fatal(err)
			}
		}, 1},
		{"the sweep of expired tokens", func() {
			e.clock.Add(ttl)
			if n, err := e.Store.SweepExpiredTokens(ctx); err != nil || n == 0 {
				t.Fatalf("sweep = %d, %v", n, err)
			}
		}, 0},
		{"account deletion", func() {
			e.login(ada, "last")
			if err := e.Store.DeleteAccount(ctx, model.ByUser(ada.ID)); err != nil {
				t.Fatal(err)
			}
		}, 1},
	} {
		tc.act()
		got := take()
		if len(got) != tc.want || slices.ContainsFunc(got, func(id uint64) bool { return id != ada.ID }) {
			t.Errorf("%s: logged revocations of %v, want %d of ada (%d)", tc.name, got, tc.want, ada.ID)
		}
	}
}

func testMessages(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, reg := e.user("ada@example.com")
	e.clock.Add(time.Second)
	// Content any valid UTF-8 may hold comes back byte for byte: a NUL,
	// both normalisation forms, a long word, every plane.
	contents := []string{
		"hello world",
		"nul \x00 inside",
		"caf\u00e9 cafe\u0301 ΣΊΣΥΦΟΣ σίσυφος",
		strings.Repeat("λ", 300) + " " + strings.Repeat("x", 200),
		"emoji 😀 and \U0010FFFD",
		strings.Repeat("é", model.MaxContentChars),
	}
	for _, c := range contents {
		m, err := e.Store.CreateMessage(ctx, model.ByToken(reg), c)
		if err != nil {
			t.Fatalf("CreateMessage(%d bytes) = %v", len(c), err)
		}
		if m.ID == 0 || m.OwnerID != ada.ID || m.OwnerEmail != ada.Email || m.Content != c || m.Revision != 1 ||
			!m.CreatedAt.Equal(e.clock.Now().Truncate(time.Microsecond)) || !m.UpdatedAt.Equal(m.CreatedAt) {
			t.Errorf("created = %+v", m)
		}
		u, got, err := e.Store.Message(ctx, model.ByToken(reg), m.ID)
		if err != nil || u.ID != ada.ID || got.Content != c || got.OwnerEmail != ada.Email || !got.CreatedAt.Equal(m.CreatedAt) || got.Revision != 1 {
			t.Errorf("Message(%d) = %+v, %+v, %v", m.ID, u, got, err)
		}
		if u, _, err := e.Store.Message(ctx, model.ByServer(), m.ID); err != nil || u != nil {
			t.Errorf("Message(ByServer) = %v, %v; want no account", u, err)
		}
	}
	_, _, err := e.Store.Message(ctx, model.ByToken(reg), 999)
	wantKind(t, "Message(999)", err, model.ErrNotFound, "message 999 does not exist")
	_, _, err = e.Store.Message(ctx, model.ByToken(TokenHash("nobody")), 1)
	wantKind(t, "Message(unknown token)", err, model.ErrUnauthorized, "")

	before := e.counts()
	for _, bad := range []string{"", "   ", "bad \xff", strings.Repeat("a", model.MaxContentChars+1)} {
		_, err := e.Store.CreateMessage(ctx, model.ByToken(reg), bad)
		wantKind(t, fmt.Sprintf("CreateMessage(%d bad bytes)", len(bad)), err, model.ErrInvalid, "")
	}
	_, err = e.Store.CreateMessage(ctx, model.ByServer(), "hi")
	wantKind(t, "CreateMessage(ByServer)", err, model.ErrUnauthorized, "")
	_, err = e.Store.CreateMessage(ctx, model.ByToken(TokenHash("nobody")), "hi")
	wantKind(t, "CreateMessage(unknown token)", err, model.ErrUnauthorized, "")
	_, err = e.Store.CreateMessage(ctx, model.ByUser(999), "hi")
	wantKind(t, "CreateMessage(unknown user)", err, model.ErrNotFound, "")
	if got := e.counts(); got != before {
		t.Errorf("refused creates changed the counts: %+v, want %+v", got, before)
	}

	// Updates: a change bumps the revision and UpdatedAt; none changes
	// nothing.
	m := e.post(ada.ID, "first")
	e.clock.Add(time.Minute)
	up, err := e.Store.UpdateMessage(ctx, m.ID, model.ByToken(reg), model.MessageUpdate{Content: ptr("second")}, nil)
	if err != nil || up.Content != "second" || up.Revision != 2 || !up.UpdatedAt.Equal(e.clock.Now().Truncate(time.Microsecond)) || !up.CreatedAt.Equal(m.CreatedAt) {
		t.Errorf("UpdateMessage = %+v, %v", up, err)
	}
	e.clock.Add(time.Minute)
	for _, upd := range []model.MessageUpdate{{}, {Content: ptr("second")}} {
		same, err := e.Store.UpdateMessage(ctx, m.ID, model.ByToken(reg), upd, nil)
		if err != nil || same.Revision != 2 || !same.UpdatedAt.Equal(up.UpdatedAt) {
			t.Errorf("an update that changes nothing = %+v, %v", same, err)
		}
	}
	_, err = e.Store.UpdateMessage(ctx, m.ID, model.ByToken(reg), model.MessageUpdate{Content: ptr(" ")}, nil)
	wantKind(t, "UpdateMessage(blank)", err, model.ErrInvalid, "")
	_, err = e.Store.UpdateMessage(ctx, 999, model.ByToken(reg), model.MessageUpdate{Content: ptr("x")}, nil)
	wantKind(t, "UpdateMessage(999)", err, model.ErrNotFound, "message 999 does not exist")
	del, err := e.Store.DeleteMessage(ctx, m.ID, model.ByToken(reg), nil)
	if err != nil || del.ID != m.ID || del.Content != "second" || del.Revision != 2 {
		t.Errorf("DeleteMessage = %+v, %v", del, err)
	}
	_, err = e.Store.DeleteMessage(ctx, m.ID, model.ByToken(reg), nil)
	wantKind(t, "DeleteMessage(twice)", err, model.ErrNotFound, fmt.Sprintf("message %d does not exist", m.ID))
}

func testOwnership(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, _ := e.user("ada@example.com")
	_, bobReg := e.user("bob@example.com")
	m := e.post(ada.ID, "ada's")
	before := e.changes(0)
	_, err := e.Store.UpdateMessage(ctx, m.ID, model.ByToken(bobReg), model.MessageUpdate{Content: ptr("bob's now")}, nil)
	wantKind(t, "UpdateMessage(not owner)", err, model.ErrForbidden, fmt.Sprintf("message %d belongs to another user; only its owner may change it", m.ID))
	_, err = e.Store.DeleteMessage(ctx, m.ID, model.ByToken(bobReg), nil)
	wantKind(t, "DeleteMessage(not owner)", err, model.ErrForbidden, fmt.Sprintf("message %d belongs to another user; only its owner or an administrator may delete it", m.ID))
	// Existence is checked before ownership, the caller before both.
	_, err = e.Store.DeleteMessage(ctx, 999, model.ByToken(bobReg), nil)
	wantKind(t, "DeleteMessage(999, not owner)", err, model.ErrNotFound, "")
	_, err = e.Store.DeleteMessage(ctx, m.ID, model.ByToken(TokenHash("nobody")), nil)
	wantKind(t, "DeleteMessage(unknown token)", err, model.ErrUnauthorized, "")
	_, got, _ := e.Store.Message(ctx, model.ByServer(), m.ID)
	if got.Content != "ada's" || got.Revision != 1 {
		t.Errorf("message after refused writes = %+v", got)
	}
	if after := e.changes(0); len(after) != len(before) {
		t.Errorf("refused writes logged %d changes", len(after)-len(before))
	}
}

func testPreconditions(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, reg := e.user("ada@example.com")
	m := e.post(ada.ID, "v1")
	atRevision := func(r uint64) model.Precondition {
		return func(cur *model.Message) bool { return cur.Revision == r }
	}
	detail := fmt.Sprintf("message %d has changed since the version in If-Match; fetch it again for its current ETag", m.ID)
	if _, err := e.Store.UpdateMessage(ctx, m.ID, model.ByToken(reg), model.MessageUpdate{Content: ptr("v2")}, atRevision(1)); err != nil {
		t.Fatal(err)
	}
	_, err := e.Store.UpdateMessage(ctx, m.ID, model.ByToken(reg), model.MessageUpdate{Content: ptr("v3")}, atRevision(1))
	wantKind(t, "UpdateMessage(stale If-Match)", err, model.ErrPrecondition, detail)
	_, err = e.Store.DeleteMessage(ctx, m.ID, model.ByToken(reg), atRevision(1))
	wantKind(t, "DeleteMessage(stale If-Match)", err, model.ErrPrecondition, detail)
	// The precondition sees the message as stored, inside the write.
	var seen *model.Message
	if _, err := e.Store.DeleteMessage(ctx, m.ID, model.ByToken(reg), func(cur *model.Message) bool { seen = cur; return true }); err != nil {
		t.Fatal(err)
	}
	if seen == nil || seen.Content != "v2" || seen.Revision != 2 || seen.OwnerEmail != ada.Email {
		t.Errorf("precondition saw %+v", seen)
	}
	// Two writers with the same If-Match: exactly one wins.
	m = e.post(ada.ID, "contested")
	var wg sync.WaitGroup
	results := make([]error, 8)
	for i := range results {
		wg.Go(func() {
			_, results[i] = e.Store.UpdateMessage(ctx, m.ID, model.ByToken(reg), model.MessageUpdate{Content: ptr(fmt.Sprint("writer ", i))}, atRevision(1))
		})
	}
	wg.Wait()
	won := 0
	for _, err := range results {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, model.ErrPrecondition):
			t.Errorf("contested update = %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d writers with the same If-Match won, want 1", won)
	}
}

// testLogoutWhileWriting: a logout made while many writes with its token
// are in flight completes, and no write begun after it succeeds. (A store
// whose writes share-lock their token could hold the logout back for as
// long as writes keep coming.)
func testLogoutWhileWriting(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, reg := e.user("ada@example.com")
	m := e.post(ada.ID, "contested")
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		out      bool
		lateWins int
	)
	for w := range 12 {
		wg.Go(func() {
			for i, late := 0, 0; late < 5; i++ {
				mu.Lock()
				after := out
				mu.Unlock()
				if after {
					late++
				}
				_, err := e.Store.UpdateMessage(ctx, m.ID, model.ByToken(reg), model.MessageUpdate{Content: ptr(fmt.Sprintf("writer %d edit %d", w, i))}, nil)
				if after && err == nil {
					mu.Lock()
					lateWins++
					mu.Unlock()
				}
				if err != nil && !errors.Is(err, model.ErrUnauthorized) {
					t.Errorf("edit: %v", err)
					return
				}
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	if err := e.Store.RevokeToken(ctx, reg); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	out = true
	mu.Unlock()
	wg.Wait()
	if lateWins != 0 {
		t.Errorf("%d edits begun after the logout returned succeeded", lateWins)
	}
}

func testChangeLog(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, _ := e.user("ada@example.com")
	bob, _ := e.user("bob@example.com")
	if head, _, _ := e.Store.ChangeHead(ctx); head != 0 {
		t.Fatalf("head of an empty log = %d", head)
	}
	m1 := e.post(ada.ID, "hello world")
	m2 := e.post(bob.ID, "bob here")
	e.clock.Add(time.Second)
	up, err := e.Store.UpdateMessage(ctx, m1.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: ptr("goodbye world")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.UpdateMessage(ctx, m2.ID, model.ByUser(bob.ID), model.MessageUpdate{Content: ptr("bob here")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.DeleteMessage(ctx, m2.ID, model.ByUser(bob.ID), nil); err != nil {
		t.Fatal(err)
	}
	// Each change shows the message as it is now: m1's creation its
	// edited content, m2's nothing, being gone; its deletion no content.
	gone := *m2
	gone.Content = ""
	want := []string{
		ChangeString(&model.Change{Seq: 1, Kind: model.MessageCreated, Message: *up, Scrubbed: true}),
		ChangeString(&model.Change{Seq: 2, Kind: model.MessageCreated, Message: gone, Scrubbed: true, Gone: true}),
		ChangeString(&model.Change{Seq: 3, Kind: model.MessageUpdated, Message: *up}),
		ChangeString(&model.Change{Seq: 4, Kind: model.MessageDeleted, Message: gone}),
	}
	if got := changeStrings(e.changes(0)); !slices.Equal(got, want) {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Paging, resuming, and what the log does not hold.
	chs, head, err := e.Store.ChangesAfter(ctx, 1, 2)
	if err != nil || head != 4 || len(chs) != 2 || chs[0].Seq != 2 || chs[1].Seq != 3 {
		t.Errorf("ChangesAfter(1, 2) = %v, %d, %v", changeStrings(chs), head, err)
	}
	if chs, head, err := e.Store.ChangesAfter(ctx, 4, 10); err != nil || len(chs) != 0 || head != 4 {
		t.Errorf("ChangesAfter(head) = %v, %d, %v", chs, head, err)
	}
	if _, _, err := e.Store.ChangesAfter(ctx, 5, 10); !errors.Is(err, model.ErrChangeUnknown) {
		t.Errorf("ChangesAfter(beyond the head) = %v, want ErrChangeUnknown", err)
	}
	for _, ch := range e.changes(0) {
		if ch.At.IsZero() {
			t.Errorf("change %d has no time", ch.Seq)
		}
	}
}

func testChangeHeadWakes(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, _ := e.user("ada@example.com")
	head, wait, err := e.Store.ChangeHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-wait:
		t.Fatal("the wake-up channel is closed before any change")
	default:
	}
	e.post(ada.ID, "wake up")
	select {
	case <-wait:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up within 10s of a commit")
	}
	if now, _, _ := e.Store.ChangeHead(ctx); now != head+1 {
		t.Errorf("head after a commit = %d, want %d", now, head+1)
	}
}

func testTrimChanges(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, _ := e.user("ada@example.com")
	for i := range 10 {
		e.clock.Add(time.Hour)
		e.post(ada.ID, fmt.Sprint("message ", i))
	}
	if n, err := e.Store.TrimChanges(ctx, 0, 7); err != nil || n != 3 {
		t.Fatalf("TrimChanges(keep 7) = %d, %v; want 3", n, err)
	}
	if _, _, err := e.Store.ChangesAfter(ctx, 2, 10); !errors.Is(err, model.ErrChangeUnknown) {
		t.Errorf("ChangesAfter(trimmed) = %v, want ErrChangeUnknown", err)
	}
	if chs := e.changes(3); len(chs) != 7 || chs[0].Seq != 4 {
		t.Errorf("after the floor: %v", changeStrings(chs))
	}
	// By age and by count: age would cut 2 (4 and 5), keeping the
	// newest 2 cuts 5; the longer cut wins.
	if n, err := e.Store.TrimChanges(ctx, 4*time.Hour+time.Minute, 2); err != nil || n != 5 {
		t.Fatalf("TrimChanges(4h, keep 2) = %d, %v; want 5 (the count bound cuts 5, age 3)", n, err)
	}
	if chs := e.changes(8); len(chs) != 2 {
		t.Errorf("left after trimming = %v", changeStrings(chs))
	}
	if n, err := e.Store.TrimChanges(ctx, 30*time.Minute, 0); err != nil || n != 1 {
		t.Fatalf("TrimChanges(30m) = %d, %v; want 1", n, err)
	}
	if n, err := e.Store.TrimChanges(ctx, 0, 0); err != nil || n != 0 {
		t.Errorf("TrimChanges without bounds = %d, %v", n, err)
	}
	// The log goes on from its head.
	m := e.post(ada.ID, "after trimming")
	if chs := e.changes(9); len(chs) != 2 || chs[1].Seq != 11 || chs[1].Message.ID != m.ID {
		t.Errorf("log after a trim and a post = %v", changeStrings(chs))
	}
	// A big log trims in chunks.
	for i := range 1200 {
		if _, err := e.Store.CreateMessage(ctx, model.ByUser(ada.ID), fmt.Sprint("bulk ", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := e.Store.TrimChanges(ctx, 0, 1); err != nil || n != 1201 {
		t.Errorf("TrimChanges(keep 1) of 1202 = %d, %v", n, err)
	}
}

func testConcurrentWrites(e *env) {
	t := e.t
	ctx := e.ctx()
	var users []*model.User
	for i := range 4 {
		u, _ := e.user(fmt.Sprintf("writer%d@example.com", i))
		users = append(users, u)
	}
	const each = 40
	var wg sync.WaitGroup
	errs := make(chan error, len(users)*each)
	for _, u := range users {
		wg.Go(func() {
			for i := range each {
				m, err := e.Store.CreateMessage(ctx, model.ByUser(u.ID), fmt.Sprintf("from %d, %d", u.ID, i))
				if err != nil {
					errs <- err
					return
				}
				if i%4 == 0 {
					if _, err := e.Store.UpdateMessage(ctx, m.ID, model.ByUser(u.ID), model.MessageUpdate{Content: ptr("edited " + m.Content)}, nil); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	chs := e.changes(0)
	if got, want := len(chs), len(users)*(each+each/4); got != want {
		t.Fatalf("%d changes logged, want %d", got, want)
	}
	var lastID uint64
	var lastCreated time.Time
	for i, ch := range chs {
		if ch.Seq != uint64(i+1) {
			t.Fatalf("change %d has position %d: the log is not dense", i+1, ch.Seq)
		}
		if ch.Kind != model.MessageCreated {
			continue
		}
		// Creations are logged in ID order, and times never fall as IDs rise.
		if ch.Message.ID <= lastID || ch.Message.CreatedAt.Before(lastCreated) {
			t.Fatalf("change %d creates message %d at %v after %d at %v", ch.Seq, ch.Message.ID, ch.Message.CreatedAt, lastID, lastCreated)
		}
		lastID, lastCreated = ch.Message.ID, ch.Message.CreatedAt
	}
}

func testDeleteAccount(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, reg := e.user("ada@example.com")
	bob, bobReg := e.user("bob@example.com")
	e.login(ada, "phone")
	var adas []*model.Message
	for i := range 30 {
		adas = append(adas, e.post(ada.ID, fmt.Sprint("ada ", i)))
	}
	kept := e.post(bob.ID, "bob stays")
	beyondInt64 := uint64(1)<<63 + 5
	e.wantMissing([]uint64{bob.ID, beyondInt64, ada.ID, 999, bob.ID, 999}, []uint64{beyondInt64, 999, 999})
	e.wantMissing(nil, nil)
	head, _, _ := e.Store.ChangeHead(ctx)
	err := e.Store.DeleteAccount(ctx, model.ByToken(bobReg))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Store.DeleteAccount(ctx, model.ByToken(reg)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.UserByEmail(ctx, "ada@example.com"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("deleted account still found: %v", err)
	}
	if _, _, err := e.Store.Authenticate(ctx, reg); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("deleted account's token still works: %v", err)
	}
	for _, m := range adas {
		if _, _, err := e.Store.Message(ctx, model.ByServer(), m.ID); !errors.Is(err, model.ErrNotFound) {
			t.Fatalf("message %d of a deleted account: %v", m.ID, err)
		}
	}
	if _, _, err := e.Store.Message(ctx, model.ByServer(), kept.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("bob's message after bob's deletion: %v", err)
	}
	if got := e.counts(); got != (Counts{}) {
		t.Errorf("counts after deleting both accounts = %+v", got)
	}
	// Bob: a revocation and his message; ada: a revocation and each of
	// hers, newest first, with her e-mail.
	var got []string
	for _, ch := range e.changes(head) {
		if ch.Kind == model.TokensRevoked {
			got = append(got, fmt.Sprintf("revoked %d", ch.UserID))
			continue
		}
		got = append(got, fmt.Sprintf("%s #%d %s", ch.Kind, ch.Message.ID, ch.Message.OwnerEmail))
	}
	want := []string{fmt.Sprintf("revoked %d", bob.ID), fmt.Sprintf("message.deleted #%d bob@example.com", kept.ID), fmt.Sprintf("revoked %d", ada.ID)}
	for i := len(adas) - 1; i >= 0; i-- {
		want = append(want, fmt.Sprintf("message.deleted #%d ada@example.com", adas[i].ID))
	}
	if !slices.Equal(got, want) {
		t.Errorf("log of the deletions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The e-mail is free again, for a new account with a new ID.
	again, _ := e.user("ada@example.com")
	if again.ID == ada.ID {
		t.Errorf("a new account reused the deleted one's ID %d", ada.ID)
	}
	e.wantMissing([]uint64{ada.ID, again.ID, bob.ID}, []uint64{ada.ID, bob.ID})
}

// wantMissing checks that MissingUsers finds want among ids.
func (e *env) wantMissing(ids, want []uint64) {
	e.t.Helper()
	got, err := e.Store.MissingUsers(e.ctx(), ids)
	if err != nil || !slices.Equal(got, want) {
		e.t.Errorf("MissingUsers(%v) = %v, %v; want %v", ids, got, err, want)
	}
}

func testRetention(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, _ := e.user("ada@example.com")
	var msgs []*model.Message
	for i := range 1100 {
		if i%100 == 0 {
			e.clock.Add(time.Hour)
		}
		msgs = append(msgs, e.post(ada.ID, fmt.Sprint("message ", i)))
	}
	head, _, _ := e.Store.ChangeHead(ctx)
	cutoff := msgs[1050].CreatedAt // the 11th hour's messages, 1000 on, stay
	n, err := e.Store.DeleteMessagesBefore(ctx, cutoff)
	if err != nil || n != 1000 {
		t.Fatalf("DeleteMessagesBefore = %d, %v; want 1000", n, err)
	}
	if got := e.counts().Messages; got != 100 {
		t.Errorf("%d messages left, want 100", got)
	}
	chs := e.changes(head)
	if len(chs) != 1000 {
		t.Fatalf("%d changes logged, want 1000", len(chs))
	}
	for i, ch := range chs {
		if ch.Kind != model.MessageDeleted || ch.Message.ID != msgs[i].ID || ch.Message.OwnerEmail != ada.Email || ch.Message.Content != "" {
			t.Fatalf("change %d = %s, want the deletion of %d, oldest first", i, ChangeString(ch), msgs[i].ID)
		}
	}
	if n, err := e.Store.DeleteMessagesBefore(ctx, cutoff); err != nil || n != 0 {
		t.Errorf("DeleteMessagesBefore again = %d, %v", n, err)
	}
}

// testReadsAfterTheAccountChanges: a read with a token, made again after
// the token stopped working, is refused as any check of the token would
// refuse it, and after the account changed returns it as it now is. A
// store that kept what a token resolved to, to spare its reads the
// lookup, must not answer from it once it is wrong; each case reads a
// message and a page first, so that what such a store keeps is the
// account as it was.
func testReadsAfterTheAccountChanges(e *env) {
	t := e.t
	ctx := e.ctx()
	_, rootReg := e.admin("root@example.com")
	admin := func(u *model.User, grants ...bool) error {
		for _, grant := range grants {
			if _, err := e.Store.UpdateAccount(ctx, model.ByToken(rootReg), u.ID, model.AccountUpdate{Admin: &grant}); err != nil {
				return err
			}
		}
		return nil
	}
	suspended := true
	for i, tc := range []struct {
		name   string
		change func(u *model.User, reg model.TokenHash) error
		// holds is what the account read after the change must hold; nil
		// when the reads must be refused as a token that stopped working.
		holds func(*model.User) bool
	}{
		{name: "logged out", change: func(_ *model.User, reg model.TokenHash) error { return e.Store.RevokeToken(ctx, reg) }},
		{name: "signed out everywhere", change: func(u *model.User, _ model.TokenHash) error {
			return e.Store.RevokeAllTokens(ctx, model.ByUser(u.ID))
		}},
		{name: "suspended", change: func(u *model.User, _ model.TokenHash) error {
			_, err := e.Store.UpdateAccount(ctx, model.ByToken(rootReg), u.ID, model.AccountUpdate{Suspended: &suspended})
			return err
		}},
		{name: "deleted", change: func(u *model.User, _ model.TokenHash) error { return e.Store.DeleteAccount(ctx, model.ByUser(u.ID)) }},
		{name: "made an administrator", change: func(u *model.User, _ model.TokenHash) error { return admin(u, true) },
			holds: func(got *model.User) bool { return got.HasRole(model.RoleAdmin) }},
		{name: "no longer an administrator", change: func(u *model.User, _ model.TokenHash) error { return admin(u, true, false) },
			holds: func(got *model.User) bool { return !got.HasRole(model.RoleAdmin) }},
		{name: "password changed", change: func(_ *model.User, reg model.TokenHash) error {
			return e.Store.ChangePassword(ctx, model.ByToken(reg), "another hash")
		}, holds: func(got *model.User) bool { return got.PasswordHash == "another hash" }},
		// Last: every token, the administrator's included, expires.
		{name: "expired", change: func(*model.User, model.TokenHash) error { e.clock.Add(ttl); return nil }},
	} {
		u, reg := e.user(fmt.Sprintf("reader%d@example.com", i))
		m := e.post(u.ID, "read, then read again")
		read := func() (*model.User, *model.User, error) {
			got, _, err := e.Store.Message(ctx, model.ByToken(reg), m.ID)
			if err != nil {
				return nil, nil, err
			}
			onPage, _, err := e.Store.SearchMessages(ctx, model.ByToken(reg), model.SearchQuery{Limit: 5})
			return got, onPage, err
		}
		if _, _, err := read(); err != nil {
			t.Fatalf("%s: reading before = %v", tc.name, err)
		}
		if err := tc.change(u, reg); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, onPage, err := read()
		switch {
		case tc.holds == nil:
			if !errors.Is(err, model.ErrUnauthorized) {
				t.Errorf("%s: reading after = %v, want unauthorized", tc.name, err)
			}
			// Refused every time, not only the first.
			if _, _, err := read(); !errors.Is(err, model.ErrUnauthorized) {
				t.Errorf("%s: reading again = %v, want unauthorized", tc.name, err)
			}
		case err != nil:
			t.Errorf("%s: reading after = %v", tc.name, err)
		case !tc.holds(got) || !tc.holds(onPage):
			t.Errorf("%s: read the account as %+v and %+v", tc.name, got, onPage)
		}
		// A message missing and an empty page answer as ever.
		if tc.holds != nil {
			if _, _, err := e.Store.Message(ctx, model.ByToken(reg), m.ID+1000); !errors.Is(err, model.ErrNotFound) {
				t.Errorf("%s: a missing message = %v", tc.name, err)
			}
			if _, page, err := e.Store.SearchMessages(ctx, model.ByToken(reg), model.SearchQuery{Limit: 5, BeforeID: 1}); err != nil || len(page.Messages) != 0 {
				t.Errorf("%s: an empty page = %+v, %v", tc.name, page, err)
			}
		}
	}
}

// testChangeLogKeepsNothingGone: whichever way content goes (an edit, the
// owner's deletion, an administrator's, the removal of all of an account's
// messages, the account's deletion, retention), the change log shows every
// change as the message is now, and no copy of the store holds what went.
func testChangeLogKeepsNothingGone(e *env) {
	t := e.t
	ctx := e.ctx()
	_, adminTok := e.admin("admin@example.com")
	ada, _ := e.user("ada@example.com")
	bob, _ := e.user("bob@example.com")
	carol, carolTok := e.user("carol@example.com")
	dave, _ := e.user("dave@example.com")
	e.post(dave.ID, "oldest words quebec") // for retention
	e.clock.Add(48 * time.Hour)

	edited := e.post(ada.ID, "first draft alpha")
	for _, content := range []string{"second draft bravo", "final words charlie"} {
		if _, err := e.Store.UpdateMessage(ctx, edited.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: ptr(content)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	deleted := e.post(bob.ID, "regretted delta")
	moderated := e.post(bob.ID, "abusive echo")
	kept := e.post(bob.ID, "kept words golf")
	e.post(carol.ID, "carol hotel")
	e.post(carol.ID, "carol india")
	daves := []*model.Message{e.post(dave.ID, "dave juliet"), e.post(dave.ID, "dave kilo")}
	if _, err := e.Store.UpdateMessage(ctx, daves[0].ID, model.ByUser(dave.ID), model.MessageUpdate{Content: ptr("dave lima")}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.DeleteMessage(ctx, deleted.ID, model.ByUser(bob.ID), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.DeleteMessage(ctx, moderated.ID, model.ByToken(adminTok), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.RemoveMessagesOf(ctx, model.ByToken(adminTok), dave.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.Store.DeleteAccount(ctx, model.ByToken(carolTok)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.DeleteMessagesBefore(ctx, e.clock.Now().Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}

	// Every change reads as the message is now: the edited one's creation
	// and first update show its final words, the rest of what went nothing.
	now, err := e.Store.UpdateMessage(ctx, edited.ID, model.ByUser(ada.ID), model.MessageUpdate{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	exists := map[uint64]*model.Message{edited.ID: now, kept.ID: kept}
	for _, ch := range e.changes(0) {
		if ch.Kind == model.TokensRevoked {
			continue
		}
		m, there := exists[ch.Message.ID]
		switch {
		case ch.Kind == model.MessageDeleted:
			if ch.Message.Content != "" || there {
				t.Errorf("%s: want a deletion, without content, of a message that is gone", ChangeString(ch))
			}
		case there:
			if ch.Gone || ch.Message.Content != m.Content || ch.Message.Revision != m.Revision || ch.Scrubbed != (ch.Seq != newestChange(e, m.ID)) {
				t.Errorf("%s: want message %d as it is now (%q, revision %d), scrubbed unless it is its newest change", ChangeString(ch), m.ID, m.Content, m.Revision)
			}
		default:
			if !ch.Gone || !ch.Scrubbed || ch.Message.Content != "" {
				t.Errorf("%s: want the change of a message since gone, scrubbed, without content", ChangeString(ch))
			}
		}
	}
	copied, err := e.Copy(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"alpha", "bravo", "delta", "echo", "hotel", "india", "juliet", "kilo", "lima", "quebec"} {
		if bytes.Contains(copied, []byte(gone)) || bytes.Contains(copied, []byte(hex.EncodeToString([]byte(gone)))) {
			t.Errorf("a copy of the store holds %q, which was deleted or edited away", gone)
		}
	}
	for _, there := range []string{"charlie", "golf"} {
		if !bytes.Contains(copied, []byte(there)) && !bytes.Contains(copied, []byte(hex.EncodeToString([]byte(there)))) {
			t.Errorf("a copy of the store lacks %q, which is there: the check above proves nothing", there)
		}
	}
}

// newestChange is the position of message id's newest change.
func newestChange(e *env, id uint64) uint64 {
	var newest uint64
	for _, ch := range e.changes(0) {
		if ch.Kind != model.TokensRevoked && ch.Message.ID == id {
			newest = ch.Seq
		}
	}
	return newest
}

// testChangesAsCommitted: the store hands the changes it committed itself
// to RecentChangesAfter as they committed, for the live streams it serves,
// while ChangesAfter answers each as the message is now.
func testChangesAsCommitted(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, _ := e.user("ada@example.com")
	m := e.post(ada.ID, "as it was created")
	up, err := e.Store.UpdateMessage(ctx, m.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: ptr("as it was edited")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	gone := e.post(ada.ID, "deleted at once")
	if _, err := e.Store.DeleteMessage(ctx, gone.ID, model.ByUser(ada.ID), nil); err != nil {
		t.Fatal(err)
	}
	recent, head, err := e.Store.RecentChangesAfter(ctx, 0, 100)
	if err != nil || head != 4 {
		t.Fatalf("RecentChangesAfter(0) = %v, head %d, %v", changeStrings(recent), head, err)
	}
	deleted := *gone
	deleted.Content = ""
	want := []string{
		ChangeString(&model.Change{Seq: 1, Kind: model.MessageCreated, Message: *m}),
		ChangeString(&model.Change{Seq: 2, Kind: model.MessageUpdated, Message: *up}),
		ChangeString(&model.Change{Seq: 3, Kind: model.MessageCreated, Message: *gone}),
		ChangeString(&model.Change{Seq: 4, Kind: model.MessageDeleted, Message: deleted}),
	}
	if got := changeStrings(recent); !slices.Equal(got, want) {
		t.Errorf("RecentChangesAfter(0):\n%s\nwant the changes as they committed:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := changeStrings(e.changes(0)); got[0] == want[0] || got[2] == want[2] {
		t.Errorf("ChangesAfter(0) = %q: want the created messages as they are now", got)
	}
}

// testChangesBoundedByBytes: however many changes it is asked for, a read
// of the log holds about model.ChangeBatchBytes of content at most, and
// always one change, from memory or not, for a reader to go on from.
func testChangesBoundedByBytes(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, _ := e.user("ada@example.com")
	big := strings.Repeat("€", model.MaxContentChars) // 30,000 bytes
	for range 5 {
		e.post(ada.ID, big)
	}
	huge := strings.Repeat("𝄞", model.MaxContentChars) // 40,000 bytes
	e.post(ada.ID, huge)
	for _, read := range []struct {
		name string
		fn   func(ctx context.Context, after uint64, max int) ([]*model.Change, uint64, error)
	}{{"ChangesAfter", e.Store.ChangesAfter}, {"RecentChangesAfter", e.Store.RecentChangesAfter}} {
		var got []int
		for after := uint64(0); after < 6; {
			chs, _, err := read.fn(ctx, after, 100)
			if err != nil || len(chs) == 0 {
				t.Fatalf("%s(%d) = %d changes, %v", read.name, after, len(chs), err)
			}
			bytes := 0
			for _, ch := range chs {
				bytes += model.ChangeBytes(ch)
			}
			if len(chs) > 1 && bytes > model.ChangeBatchBytes {
				t.Errorf("%s(%d) = %d changes of %d bytes, beyond %d", read.name, after, len(chs), bytes, model.ChangeBatchBytes)
			}
			got = append(got, len(chs))
			after = chs[len(chs)-1].Seq
		}
		if want := []int{2, 2, 1, 1}; !slices.Equal(got, want) {
			t.Errorf("%s read the log in batches of %v changes, want %v", read.name, got, want)
		}
	}
}
