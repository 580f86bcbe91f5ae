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
