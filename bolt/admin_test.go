package bolt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// mustAdmin makes email an administrator on the server's machine and
// returns the account and its token's hash.
func mustAdmin(tb testing.TB, db *testDB, email string) (*model.User, model.TokenHash) {
	tb.Helper()
	u, h := mustCreateUser(tb, db, email)
	if _, err := db.UpdateAccount(context.Background(), model.ByServer(), u.ID, model.AccountUpdate{Admin: ptr(true)}); err != nil {
		tb.Fatalf("granting %s: %v", email, err)
	}
	u.Roles = append(u.Roles, model.RoleAdmin)
	return u, h
}

// auditActions lists the audit log's actions, newest first, as
// "action actor→target".
func auditActions(tb testing.TB, db *testDB) []string {
	tb.Helper()
	page, err := db.AuditLog(context.Background(), model.ByServer(), model.AuditQuery{Limit: model.MaxAuditLimit})
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, e := range page.Entries {
		actor := "server"
		if e.ActorID != 0 {
			actor = e.ActorEmail
		}
		target := e.UserEmail
		switch {
		case e.MessageID != 0:
			target += fmt.Sprintf("#%d", e.MessageID)
		case e.InviteID != 0:
			target = fmt.Sprintf("invite %d", e.InviteID)
		}
		if e.Count != 0 {
			target += fmt.Sprintf(" (%d)", e.Count)
		}
		out = append(out, fmt.Sprintf("%s %s→%s", e.Action, actor, target))
	}
	return out
}

// TestRolesComeOnlyFromAdministrators: an account begins with ROLE_USER
// whatever the registration asks for, and no operation of an account on
// itself gives it a role.
func TestRolesComeOnlyFromAdministrators(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	u := &model.User{Email: "mallory@example.com", PasswordHash: fakePasswordHash, Roles: []string{model.RoleUser, model.RoleAdmin}, Suspended: true}
	if _, err := db.CreateUser(ctx, u, tokenHash("m"), defaultTTL, nil); err != nil {
		t.Fatal(err)
	}
	got, err := db.UserByEmail(ctx, "mallory@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Roles, []string{model.RoleUser}) || got.Suspended {
		t.Errorf("registered with roles %v, suspended %v; want %v alone, not suspended", got.Roles, got.Suspended, []string{model.RoleUser})
	}
	for _, try := range []func() error{
		func() error {
			_, err := db.ListAccounts(ctx, model.ByToken(tokenHash("m")), model.AccountQuery{})
			return err
		},
		func() error {
			_, err := db.UpdateAccount(ctx, model.ByToken(tokenHash("m")), u.ID, model.AccountUpdate{Admin: ptr(true)})
			return err
		},
		func() error { return db.RemoveAccount(ctx, model.ByUser(u.ID), u.ID) },
		func() error { return db.RecordBackup(ctx, model.ByUser(u.ID)) },
	} {
		if err := try(); !errors.Is(err, model.ErrForbidden) {
			t.Errorf("an account that is not an administrator: %v, want ErrForbidden", err)
		}
	}
}

// TestUpdateAccount: grants, revocations and suspensions, each in the
// audit log with who made it; a suspension deletes the account's tokens
// (a revocation in the change log) and its reset, and refuses its logins;
// lifting it lets the account log in again.
func TestUpdateAccount(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	root, rootTok := mustAdmin(t, db, "root@example.com")
	ada, adaTok := mustCreateUser(t, db, "ada@example.com")
	if _, err := db.CreatePasswordReset(ctx, model.ByToken(rootTok), ada.ID, tokenHash("reset"), time.Hour); err != nil {
		t.Fatal(err)
	}
	head, _, _ := db.ChangeHead(ctx)
	a, err := db.UpdateAccount(ctx, model.ByToken(rootTok), ada.ID, model.AccountUpdate{Suspended: ptr(true)})
	if err != nil || !a.Suspended {
		t.Fatalf("suspend = %+v, %v", a, err)
	}
	if _, _, err := db.Authenticate(ctx, adaTok); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("a suspended account's token: %v, want ErrUnauthorized", err)
	}
	if _, err := db.IssueLoginToken(ctx, ada.ID, fakePasswordHash, tokenHash("login"), defaultTTL); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("a suspended account's login: %v, want ErrForbidden", err)
	}
	if _, err := db.PasswordReset(ctx, tokenHash("reset")); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("a suspended account's reset: %v, want it gone", err)
	}
	chs, _, err := db.ChangesAfter(ctx, head, 10)
	if err != nil || len(chs) != 1 || chs[0].Kind != model.TokensRevoked || chs[0].UserID != ada.ID {
		t.Errorf("changes after the suspension: %v, %v; want ada's revocation", changeStrings(chs), err)
	}
	if _, err := db.UpdateAccount(ctx, model.ByToken(rootTok), ada.ID, model.AccountUpdate{Suspended: ptr(false), Admin: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.IssueLoginToken(ctx, ada.ID, fakePasswordHash, tokenHash("login"), defaultTTL); err != nil {
		t.Errorf("login once the suspension is lifted: %v", err)
	}
	// Ada, an administrator now, takes the role from root; root's token
	// no longer administers.
	if _, err := db.UpdateAccount(ctx, model.ByToken(tokenHash("login")), root.ID, model.AccountUpdate{Admin: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ListAccounts(ctx, model.ByToken(rootTok), model.AccountQuery{}); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("a revoked administrator lists accounts: %v, want ErrForbidden", err)
	}
	// Doing nothing writes nothing.
	if _, err := db.UpdateAccount(ctx, model.ByToken(tokenHash("login")), root.ID, model.AccountUpdate{Admin: ptr(false), Suspended: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"revoke-admin ada@example.com→root@example.com",
		"grant-admin root@example.com→ada@example.com",
		"unsuspend root@example.com→ada@example.com",
		"suspend root@example.com→ada@example.com",
		"password-reset root@example.com→ada@example.com",
		"grant-admin server→root@example.com",
	}
	if got := auditActions(t, db); !slices.Equal(got, want) {
		t.Errorf("audit log\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if _, err := db.UpdateAccount(ctx, model.ByToken(tokenHash("login")), 99, model.AccountUpdate{Suspended: ptr(true)}); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("an unknown account: %v, want ErrNotFound", err)
	}
}

// TestLastAdministrator: the last account able to administer cannot lose
// the role, be suspended or be deleted, by anyone, itself included;
// once another can, it may.
func TestLastAdministrator(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	root, rootTok := mustAdmin(t, db, "root@example.com")
	for name, try := range map[string]func() error{
		"revoke": func() error {
			_, err := db.UpdateAccount(ctx, model.ByToken(rootTok), root.ID, model.AccountUpdate{Admin: ptr(false)})
			return err
		},
		"suspend": func() error {
			_, err := db.UpdateAccount(ctx, model.ByServer(), root.ID, model.AccountUpdate{Suspended: ptr(true)})
			return err
		},
		"delete":          func() error { return db.RemoveAccount(ctx, model.ByToken(rootTok), root.ID) },
		"delete your own": func() error { return db.DeleteAccount(ctx, model.ByToken(rootTok)) },
		"suspend and keep": func() error {
			_, err := db.UpdateAccount(ctx, model.ByServer(), root.ID, model.AccountUpdate{Suspended: ptr(true), Admin: ptr(true)})
			return err
		},
	} {
		if err := try(); !errors.Is(err, model.ErrConflict) {
			t.Errorf("%s the last administrator: %v, want ErrConflict", name, err)
		}
	}
	// A suspended administrator does not count.
	other, _ := mustAdmin(t, db, "other@example.com")
	if _, err := db.UpdateAccount(ctx, model.ByToken(rootTok), other.ID, model.AccountUpdate{Suspended: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteAccount(ctx, model.ByToken(rootTok)); !errors.Is(err, model.ErrConflict) {
		t.Errorf("deleting the last administrator beside a suspended one: %v, want ErrConflict", err)
	}
	if _, err := db.UpdateAccount(ctx, model.ByToken(rootTok), other.ID, model.AccountUpdate{Suspended: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteAccount(ctx, model.ByToken(rootTok)); err != nil {
		t.Errorf("deleting an administrator beside another: %v", err)
	}
}

// TestListAccounts: newest first, by part of the e-mail in any letter
// case, paged, each with its messages counted across merges of the search
// index, edits and deletions, and when it was last seen.
func TestListAccounts(t *testing.T) {
	manualMerges(t)
	db := mustOpen(t)
	ctx := context.Background()
	_, rootTok := mustAdmin(t, db, "root@example.com")
	var users []*model.User
	for _, email := range []string{"ada@example.com", "bob@example.org", "Adam@Example.com", "zed@ada.net"} {
		u, _ := mustCreateUser(t, db, email)
		users = append(users, u)
	}
	ada := users[0]
	for i := range 5 {
		mustCreateMessage(t, db, ada.ID, fmt.Sprint("old ", i))
	}
	mergeAll(t, db.DB)
	m := mustCreateMessage(t, db, ada.ID, "new")
	mustCreateMessage(t, db, users[1].ID, "bob's")
	if _, err := db.DeleteMessage(ctx, 2, model.ByUser(ada.ID), nil); err != nil { // merged
		t.Fatal(err)
	}
	if _, err := db.DeleteMessage(ctx, m.ID, model.ByUser(ada.ID), nil); err != nil { // in the tail
		t.Fatal(err)
	}
	emails := func(p *model.AccountPage) []string {
		var out []string
		for _, a := range p.Accounts {
			out = append(out, fmt.Sprintf("%s:%d", a.Email, a.Messages))
		}
		return out
	}
	page, err := db.ListAccounts(ctx, model.ByToken(rootTok), model.AccountQuery{Match: "ADA"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := emails(page), []string{"zed@ada.net:0", "Adam@Example.com:0", "ada@example.com:4"}; !slices.Equal(got, want) || page.NextBeforeID != 0 {
		t.Errorf("match ADA = %v next %d, want %v", got, page.NextBeforeID, want)
	}
	page, err = db.ListAccounts(ctx, model.ByToken(rootTok), model.AccountQuery{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := emails(page), []string{"zed@ada.net:0", "Adam@Example.com:0"}; !slices.Equal(got, want) || page.NextBeforeID != users[2].ID {
		t.Errorf("first page = %v next %d, want %v next %d", got, page.NextBeforeID, want, users[2].ID)
	}
	page, err = db.ListAccounts(ctx, model.ByToken(rootTok), model.AccountQuery{Limit: 2, BeforeID: page.NextBeforeID})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := emails(page), []string{"bob@example.org:1", "ada@example.com:4"}; !slices.Equal(got, want) {
		t.Errorf("second page = %v, want %v", got, want)
	}
	a, err := db.Account(ctx, model.ByToken(rootTok), ada.ID)
	if err != nil || !a.LastSeenAt.Equal(a.CreatedAt) {
		t.Errorf("Account(ada) = %+v, %v; want last seen at registration", a, err)
	}
	db.Clock.Add(time.Hour)
	if _, _, err := db.Authenticate(ctx, tokenHash("register:ada@example.com")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.FlushTokenUses(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a, err = db.Account(ctx, model.ByServer(), ada.ID); err != nil || !a.LastSeenAt.Equal(db.clock()) {
		t.Errorf("after a use of her token ada was last seen %v, %v; want %v", a.LastSeenAt, err, db.clock())
	}
}

// TestRemoveAccount: an administrator deletes an account as its owner
// would; the act is in the audit log with the e-mail it had.
func TestRemoveAccount(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	_, rootTok := mustAdmin(t, db, "root@example.com")
	spam, _ := mustCreateUser(t, db, "spam@example.com")
	mustCreateMessage(t, db, spam.ID, "buy now")
	if err := db.RemoveAccount(ctx, model.ByToken(rootTok), spam.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UserByEmail(ctx, "spam@example.com"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("the removed account: %v", err)
	}
	if c := mustCounts(t, db); c.Messages != 0 {
		t.Errorf("%d messages left, want 0", c.Messages)
	}
	if got := auditActions(t, db)[0]; got != "delete-account root@example.com→spam@example.com" {
		t.Errorf("audit = %q", got)
	}
	if err := db.RemoveAccount(ctx, model.ByToken(rootTok), spam.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("removing it again: %v, want ErrNotFound", err)
	}
}

// TestRemoveMessagesOf: every message the account held when the act was
// made goes, with a deletion in the change log for each (the owner's
// e-mail with it); the account stays, and what it writes later stays;
// the audit log has the count. A removal a crash cut short is finished by
// the next Open, and only up to the message it was made at.
func TestRemoveMessagesOf(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	_, rootTok := mustAdmin(t, db, "root@example.com")
	spam, _ := mustCreateUser(t, db, "spam@example.com")
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	for i := range purgeChunk + 5 {
		mustCreateMessage(t, db, spam.ID, fmt.Sprint("spam ", i))
	}
	kept := mustCreateMessage(t, db, ada.ID, "ada stays")
	head, _, _ := db.ChangeHead(ctx)
	n, err := db.RemoveMessagesOf(ctx, model.ByToken(rootTok), spam.ID)
	if err != nil || n != purgeChunk+5 {
		t.Fatalf("RemoveMessagesOf = %d, %v; want %d", n, err, purgeChunk+5)
	}
	chs, _, err := db.ChangesAfter(ctx, head, 2*purgeChunk)
	if err != nil || len(chs) != n {
		t.Fatalf("%d changes, %v; want %d deletions", len(chs), err, n)
	}
	for _, ch := range chs {
		if ch.Kind != model.MessageDeleted || ch.Message.OwnerEmail != "spam@example.com" {
			t.Fatalf("change %s, want spam's deletions", changeString(ch))
		}
	}
	if _, err := db.UserByEmail(ctx, "spam@example.com"); err != nil {
		t.Errorf("the account after its messages went: %v", err)
	}
	if got := mustMessage(t, db, kept.ID); got.Content != "ada stays" {
		t.Errorf("ada's message: %q", got.Content)
	}
	if got := auditActions(t, db)[0]; got != fmt.Sprintf("delete-messages root@example.com→spam@example.com (%d)", n) {
		t.Errorf("audit = %q", got)
	}

	// Cut short: the mark as the first transaction leaves it, at message
	// `mark`; one written after it must survive the next Open's purge.
	old := mustCreateMessage(t, db, spam.ID, "before the act")
	err = db.writes.update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketPurging).Put(itob(spam.ID), itob(old.ID))
	})
	if err != nil {
		t.Fatal(err)
	}
	newer := mustCreateMessage(t, db, spam.ID, "after the act")
	reopen(t, db)
	if _, _, err := db.Message(ctx, model.ByServer(), old.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("the message the interrupted removal was made at: %v, want gone", err)
	}
	if _, _, err := db.Message(ctx, model.ByServer(), newer.ID); err != nil {
		t.Errorf("a message written after the act: %v, want kept", err)
	}
}

// TestInvites: an invitation lets its uses register until it expires, is
// refused with one answer once used up, revoked, expired or unknown, and
// is kept only as its code's hash; expired ones are swept.
func TestInvites(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	_, rootTok := mustAdmin(t, db, "root@example.com")
	now := db.clock()
	for _, bad := range []model.Invite{
		{MaxUses: 0, ExpiresAt: now.Add(time.Hour)},
		{MaxUses: model.MaxInviteUses + 1, ExpiresAt: now.Add(time.Hour)},
		{MaxUses: 1, ExpiresAt: now},
		{MaxUses: 1, ExpiresAt: now.Add(model.MaxInviteLifetime + time.Hour)},
	} {
		if err := db.CreateInvite(ctx, model.ByToken(rootTok), &bad); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("CreateInvite(%+v) = %v, want ErrInvalid", bad, err)
		}
	}
	two := &model.Invite{MaxUses: 2, ExpiresAt: now.Add(time.Hour), CodeHash: tokenHash("two")}
	once := &model.Invite{MaxUses: 1, ExpiresAt: now.Add(2 * time.Hour), CodeHash: tokenHash("once")}
	for _, inv := range []*model.Invite{two, once} {
		if err := db.CreateInvite(ctx, model.ByToken(rootTok), inv); err != nil {
			t.Fatal(err)
		}
	}
	register := func(email string, code model.TokenHash) error {
		_, err := db.CreateUser(ctx, &model.User{Email: email, PasswordHash: fakePasswordHash}, tokenHash(email), defaultTTL, &code)
		return err
	}
	badInvite := func(name string, err error) {
		t.Helper()
		if got := violationFields(t, err); !slices.Equal(got, []string{"invite"}) {
			t.Errorf("%s: violations %v, want invite", name, got)
		}
	}
	for _, email := range []string{"a@example.com", "b@example.com"} {
		if err := register(email, tokenHash("two")); err != nil {
			t.Fatalf("%s: %v", email, err)
		}
	}
	badInvite("used up", register("c@example.com", tokenHash("two")))
	badInvite("unknown", register("c@example.com", tokenHash("nope")))
	if err := db.RevokeInvite(ctx, model.ByToken(rootTok), once.ID); err != nil {
		t.Fatal(err)
	}
	badInvite("revoked", register("c@example.com", tokenHash("once")))
	if _, err := db.UserByEmail(ctx, "c@example.com"); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("c registered with a refused invitation: %v", err)
	}
	later := &model.Invite{MaxUses: 5, ExpiresAt: now.Add(time.Hour), CodeHash: tokenHash("later")}
	if err := db.CreateInvite(ctx, model.ByToken(rootTok), later); err != nil {
		t.Fatal(err)
	}
	invites, err := db.Invites(ctx, model.ByToken(rootTok))
	if err != nil || len(invites) != 2 || invites[0].ID != later.ID || invites[1].Uses != 2 {
		t.Errorf("Invites = %+v, %v; want later, then two used twice", invites, err)
	}
	db.Clock.Add(time.Hour)
	badInvite("expired", register("d@example.com", tokenHash("later")))
	if n, err := db.SweepExpiredCodes(ctx); err != nil || n != 2 {
		t.Errorf("SweepExpiredCodes = %d, %v; want the two expired", n, err)
	}
	want := []string{fmt.Sprintf("create-invite root@example.com→invite %d", later.ID),
		fmt.Sprintf("revoke-invite root@example.com→invite %d", once.ID),
		fmt.Sprintf("create-invite root@example.com→invite %d", once.ID),
		fmt.Sprintf("create-invite root@example.com→invite %d", two.ID),
		"grant-admin server→root@example.com"}
	if got := auditActions(t, db); !slices.Equal(got, want) {
		t.Errorf("audit log\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPasswordResets: a code sets a new password once, before it expires,
// and takes every token of the account with it; a new code replaces the
// account's old one; deleting the account takes its code.
func TestPasswordResets(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	_, rootTok := mustAdmin(t, db, "root@example.com")
	ada, adaTok := mustCreateUser(t, db, "ada@example.com")
	if _, err := db.CreatePasswordReset(ctx, model.ByToken(rootTok), ada.ID, tokenHash("first"), time.Hour); err != nil {
		t.Fatal(err)
	}
	r, err := db.CreatePasswordReset(ctx, model.ByToken(rootTok), ada.ID, tokenHash("second"), time.Hour)
	if err != nil || !r.ExpiresAt.Equal(db.clock().Add(time.Hour)) {
		t.Fatalf("second reset = %+v, %v", r, err)
	}
	bad := func(name string, err error) {
		t.Helper()
		if got := violationFields(t, err); !slices.Equal(got, []string{"code"}) {
			t.Errorf("%s: violations %v, want code", name, got)
		}
	}
	bad("replaced", db.ResetPassword(ctx, tokenHash("first"), "new hash"))
	if got, err := db.PasswordReset(ctx, tokenHash("second")); err != nil || got.UserID != ada.ID {
		t.Errorf("PasswordReset(second) = %+v, %v", got, err)
	}
	if err := db.ResetPassword(ctx, tokenHash("second"), "new hash"); err != nil {
		t.Fatal(err)
	}
	if u, _ := db.UserByEmail(ctx, "ada@example.com"); u.PasswordHash != "new hash" {
		t.Errorf("password hash %q after the reset", u.PasswordHash)
	}
	if _, _, err := db.Authenticate(ctx, adaTok); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("a token from before the reset: %v, want revoked", err)
	}
	bad("used", db.ResetPassword(ctx, tokenHash("second"), "again"))
	if _, err := db.CreatePasswordReset(ctx, model.ByToken(rootTok), ada.ID, tokenHash("third"), time.Hour); err != nil {
		t.Fatal(err)
	}
	db.Clock.Add(time.Hour)
	bad("expired", db.ResetPassword(ctx, tokenHash("third"), "late"))
	if _, err := db.CreatePasswordReset(ctx, model.ByToken(rootTok), ada.ID, tokenHash("fourth"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteAccount(ctx, model.ByUser(ada.ID)); err != nil {
		t.Fatal(err)
	}
	bad("account deleted", db.ResetPassword(ctx, tokenHash("fourth"), "gone"))
	if _, err := db.CreatePasswordReset(ctx, model.ByToken(rootTok), ada.ID, tokenHash("fifth"), time.Hour); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("a reset of a deleted account: %v, want ErrNotFound", err)
	}
}

// TestModeration: an administrator deletes anyone's message, in the audit
// log; only the owner edits; others may do neither.
func TestModeration(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	_, rootTok := mustAdmin(t, db, "root@example.com")
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	m := mustCreateMessage(t, db, ada.ID, "spam")
	if _, err := db.DeleteMessage(ctx, m.ID, model.ByUser(bob.ID), nil); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("bob deletes ada's message: %v, want ErrForbidden", err)
	}
	if _, err := db.UpdateMessage(ctx, m.ID, model.ByToken(rootTok), model.MessageUpdate{Content: ptr("edited")}, nil); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("an administrator edits ada's message: %v, want ErrForbidden", err)
	}
	if _, err := db.DeleteMessage(ctx, m.ID, model.ByToken(rootTok), nil); err != nil {
		t.Errorf("an administrator deletes ada's message: %v", err)
	}
	if got := auditActions(t, db)[0]; got != fmt.Sprintf("delete-message root@example.com→ada@example.com#%d", m.ID) {
		t.Errorf("audit = %q", got)
	}
	own := mustCreateMessage(t, db, ada.ID, "mine")
	if _, err := db.DeleteMessage(ctx, own.ID, model.ByUser(ada.ID), nil); err != nil {
		t.Fatal(err)
	}
	if got := len(auditActions(t, db)); got != 2 {
		t.Errorf("%d audit entries after an owner's own deletion, want it not logged", got)
	}
}

// TestAuditLogTrimmed: pages newest first, trimmed by age and count.
func TestAuditLogTrimmed(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	_, rootTok := mustAdmin(t, db, "root@example.com")
	for range 9 {
		db.Clock.Add(time.Hour)
		if err := db.RecordBackup(ctx, model.ByToken(rootTok)); err != nil {
			t.Fatal(err)
		}
	}
	page, err := db.AuditLog(ctx, model.ByToken(rootTok), model.AuditQuery{Limit: 4})
	if err != nil || len(page.Entries) != 4 || page.Entries[0].ID != 10 || page.NextBeforeID != 7 {
		t.Fatalf("first page = %+v next %d, %v", page.Entries, page.NextBeforeID, err)
	}
	page, err = db.AuditLog(ctx, model.ByToken(rootTok), model.AuditQuery{Limit: 4, BeforeID: 7})
	if err != nil || len(page.Entries) != 4 || page.Entries[0].ID != 6 {
		t.Fatalf("second page = %+v, %v", page.Entries, err)
	}
	if n, err := db.TrimAudit(ctx, 0, 6); err != nil || n != 4 {
		t.Errorf("TrimAudit(keep 6) = %d, %v; want 4", n, err)
	}
	if n, err := db.TrimAudit(ctx, 2*time.Hour+time.Minute, 0); err != nil || n != 3 {
		t.Errorf("TrimAudit(keep 2h) = %d, %v; want 3", n, err)
	}
	if got := len(auditActions(t, db)); got != 3 {
		t.Errorf("%d entries left, want 3", got)
	}
}

// TestCommitFoundOnDiskAfterFailing: a commit that failed but is visible
// to readers after all (its meta page went out before its sync failed)
// stops the store's writes, and Ping says so, rather than let the change
// feed skip it and clients told of a failure write again; a failure that
// left nothing behind stops nothing.
func TestCommitFoundOnDiskAfterFailing(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	var current int
	_ = db.bolt.View(func(tx *bbolt.Tx) error { current = tx.ID(); return nil })
	db.checkRolledBack(current+1, errors.New("rolled back"))
	if _, err := db.CreateMessage(ctx, model.ByUser(ada.ID), "still writing"); err != nil {
		t.Fatalf("a failure that left nothing behind: %v", err)
	}
	_ = db.bolt.View(func(tx *bbolt.Tx) error { current = tx.ID(); return nil })
	db.checkRolledBack(current, errors.New("sync failed after the meta page"))
	if _, err := db.CreateMessage(ctx, model.ByUser(ada.ID), "no more"); !errors.Is(err, errBroken) {
		t.Errorf("a write after a failed commit reached the disk: %v, want errBroken", err)
	}
	if err := db.Ping(ctx); !errors.Is(err, errBroken) {
		t.Errorf("Ping = %v, want errBroken", err)
	}
	if _, err := db.UserByEmail(ctx, "ada@example.com"); err != nil {
		t.Errorf("a read after writes stopped: %v", err)
	}
	db.broken.Store(nil) // so the test's cleanup can check and close
}
