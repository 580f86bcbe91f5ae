package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"herald/model"
)

// The administration: roles checked inside each operation, the last
// administrator kept, suspensions, invitations, password resets,
// moderation and the audit log, alike on every store.

// admin makes a new administrator on the server's machine, as herald
// admin create does, and logs it in.
func (e *env) admin(email string) (*model.User, model.TokenHash) {
	e.t.Helper()
	u := &model.User{Email: email, PasswordHash: FakePasswordHash}
	if err := e.Store.CreateAdministrator(e.ctx(), u); err != nil {
		e.t.Fatalf("CreateAdministrator(%q) = %v", email, err)
	}
	return u, e.login(u, "admin login:"+email)
}

// auditActs renders the audit log, oldest first, as "actor action target".
func (e *env) auditActs() []string {
	e.t.Helper()
	page, err := e.Store.AuditLog(e.ctx(), model.ByServer(), model.AuditQuery{Limit: model.MaxAuditLimit})
	if err != nil {
		e.t.Fatalf("AuditLog = %v", err)
	}
	var out []string
	for i := len(page.Entries) - 1; i >= 0; i-- {
		a := page.Entries[i]
		actor := a.ActorEmail
		if actor == "" {
			actor = "server"
		}
		s := fmt.Sprintf("%s %s", actor, a.Action)
		if a.UserEmail != "" {
			s += " " + a.UserEmail
		}
		if a.MessageID != 0 {
			s += fmt.Sprintf(" #%d", a.MessageID)
		}
		if a.InviteID != 0 {
			s += fmt.Sprintf(" invite %d", a.InviteID)
		}
		if a.Action == model.AuditDeleteMessages {
			s += fmt.Sprintf(" (%d)", a.Count)
		}
		out = append(out, s)
	}
	return out
}

// testHasAdministrator: whether an account can administer, as the
// startup's log asks: not on an empty store nor with users alone, yes
// once one is made, and still with one suspended beside another.
func testHasAdministrator(e *env) {
	t := e.t
	has := func(when string, want bool) {
		t.Helper()
		if got, err := e.Store.HasAdministrator(e.ctx()); err != nil || got != want {
			t.Errorf("HasAdministrator %s = %v, %v; want %v", when, got, err, want)
		}
	}
	has("on an empty store", false)
	ada, _ := e.user("ada@example.com")
	has("with a user only", false)
	root, _ := e.admin("root@example.com")
	has("with an administrator", true)
	if _, err := e.Store.UpdateAccount(e.ctx(), model.ByServer(), ada.ID, model.AccountUpdate{Admin: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.UpdateAccount(e.ctx(), model.ByServer(), root.ID, model.AccountUpdate{Suspended: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	has("with one administrator suspended and another not", true)
}

func testAdministration(e *env) {
	t := e.t
	ctx := e.ctx()
	root, rootTok := e.admin("root@example.com")
	if !root.HasRole(model.RoleAdmin) || root.ID == 0 {
		t.Fatalf("administrator created = %+v", root)
	}
	ada, adaTok := e.user("ada@example.com")
	bob, bobTok := e.user("bob@example.com")
	for range 3 {
		e.post(bob.ID, "bob writes")
	}

	// Nobody but an administrator (or the server's machine) administers,
	// and the check is the store's own.
	for name, call := range map[string]func() error{
		"ListAccounts": func() error {
			_, err := e.Store.ListAccounts(ctx, model.ByToken(adaTok), model.AccountQuery{})
			return err
		},
		"Account": func() error { _, err := e.Store.Account(ctx, model.ByToken(adaTok), bob.ID); return err },
		"UpdateAccount": func() error {
			_, err := e.Store.UpdateAccount(ctx, model.ByToken(adaTok), ada.ID, model.AccountUpdate{Admin: ptr(true)})
			return err
		},
		"RemoveAccount":    func() error { return e.Store.RemoveAccount(ctx, model.ByToken(adaTok), bob.ID) },
		"RemoveMessagesOf": func() error { _, err := e.Store.RemoveMessagesOf(ctx, model.ByToken(adaTok), bob.ID); return err },
		"Invites":          func() error { _, err := e.Store.Invites(ctx, model.ByToken(adaTok)); return err },
		"AuditLog": func() error {
			_, err := e.Store.AuditLog(ctx, model.ByToken(adaTok), model.AuditQuery{})
			return err
		},
		"RecordBackup": func() error { return e.Store.RecordBackup(ctx, model.ByToken(adaTok)) },
	} {
		wantKind(t, name+" by a user", call(), model.ErrForbidden, "")
	}
	if _, err := e.Store.ListAccounts(ctx, model.ByToken(TokenHash("nobody")), model.AccountQuery{}); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("ListAccounts with an unknown token = %v, want unauthorized", err)
	}

	// Listing: newest first, pages, a match on the e-mail, message counts.
	page, err := e.Store.ListAccounts(ctx, model.ByToken(rootTok), model.AccountQuery{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Accounts) != 2 || page.Accounts[0].ID != bob.ID || page.Accounts[1].ID != ada.ID || page.NextBeforeID != ada.ID {
		t.Fatalf("first page = %+v", page)
	}
	if page.Accounts[0].Messages != 3 || page.Accounts[1].Messages != 0 {
		t.Errorf("message counts = %d, %d, want 3, 0", page.Accounts[0].Messages, page.Accounts[1].Messages)
	}
	page, err = e.Store.ListAccounts(ctx, model.ByToken(rootTok), model.AccountQuery{Limit: 2, BeforeID: page.NextBeforeID})
	if err != nil || len(page.Accounts) != 1 || page.Accounts[0].ID != root.ID || page.NextBeforeID != 0 {
		t.Fatalf("second page = %+v, %v", page, err)
	}
	page, err = e.Store.ListAccounts(ctx, model.ByServer(), model.AccountQuery{Match: "BOB@"})
	if err != nil || len(page.Accounts) != 1 || page.Accounts[0].ID != bob.ID {
		t.Fatalf("match BOB@ = %+v, %v", page, err)
	}
	page, err = e.Store.ListAccounts(ctx, model.ByServer(), model.AccountQuery{Match: "%"})
	if err != nil || len(page.Accounts) != 0 {
		t.Errorf("match %% = %+v, %v; want none", page, err)
	}
	if _, err := e.Store.Account(ctx, model.ByServer(), 999999); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("Account(unknown) = %v", err)
	}

	// A suspension deletes the tokens (a revocation in the log) and
	// refuses logins; lifting it lets the account log in again.
	head, _, _ := e.Store.ChangeHead(ctx)
	a, err := e.Store.UpdateAccount(ctx, model.ByToken(rootTok), bob.ID, model.AccountUpdate{Suspended: ptr(true)})
	if err != nil || !a.Suspended || a.Messages != 3 {
		t.Fatalf("suspending bob = %+v, %v", a, err)
	}
	if _, _, err := e.Store.Authenticate(ctx, bobTok); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("a suspended account's token = %v, want unauthorized", err)
	}
	if got := changeStrings(e.changes(head)); !slices.Equal(got, []string{fmt.Sprintf("%d tokens.revoked of account %d", head+1, bob.ID)}) {
		t.Errorf("log of the suspension = %q", got)
	}
	_, err = e.Store.IssueLoginToken(ctx, bob.ID, bob.PasswordHash, TokenHash("bob again"), ttl)
	wantKind(t, "IssueLoginToken(suspended)", err, model.ErrForbidden, "")
	if _, err := e.Store.UpdateAccount(ctx, model.ByToken(rootTok), bob.ID, model.AccountUpdate{Suspended: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	bobTok = e.login(bob, "bob after")

	// Roles: granted and revoked; the last administrator stays one.
	if a, err := e.Store.UpdateAccount(ctx, model.ByToken(rootTok), ada.ID, model.AccountUpdate{Admin: ptr(true)}); err != nil || !a.HasRole(model.RoleAdmin) {
		t.Fatalf("granting ada = %+v, %v", a, err)
	}
	if _, err := e.Store.ListAccounts(ctx, model.ByToken(adaTok), model.AccountQuery{}); err != nil {
		t.Errorf("ada, granted, lists accounts: %v", err)
	}
	if _, err := e.Store.UpdateAccount(ctx, model.ByToken(adaTok), root.ID, model.AccountUpdate{Admin: ptr(false)}); err != nil {
		t.Fatal(err)
	}
	_, err = e.Store.UpdateAccount(ctx, model.ByToken(adaTok), ada.ID, model.AccountUpdate{Admin: ptr(false)})
	wantKind(t, "revoking the last administrator", err, model.ErrConflict, "")
	_, err = e.Store.UpdateAccount(ctx, model.ByToken(adaTok), ada.ID, model.AccountUpdate{Suspended: ptr(true)})
	wantKind(t, "suspending the last administrator", err, model.ErrConflict, "")
	wantKind(t, "the last administrator deleting itself", e.Store.DeleteAccount(ctx, model.ByToken(adaTok)), model.ErrConflict, "")
	wantKind(t, "removing the last administrator", e.Store.RemoveAccount(ctx, model.ByServer(), ada.ID), model.ErrConflict, "")
	if _, err := e.Store.ListAccounts(ctx, model.ByToken(rootTok), model.AccountQuery{}); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("root, revoked, lists accounts: %v", err)
	}

	// Moderation: an administrator deletes anyone's message; a user does
	// not; removing an account's messages keeps what comes after.
	bobs := e.post(bob.ID, "spam")
	if _, err := e.Store.DeleteMessage(ctx, bobs.ID, model.ByToken(rootTok), nil); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("a former administrator deleting bob's message = %v", err)
	}
	if _, err := e.Store.DeleteMessage(ctx, bobs.ID, model.ByToken(adaTok), nil); err != nil {
		t.Fatalf("an administrator deleting bob's message = %v", err)
	}
	head, _, _ = e.Store.ChangeHead(ctx)
	n, err := e.Store.RemoveMessagesOf(ctx, model.ByToken(adaTok), bob.ID)
	if err != nil || n != 3 {
		t.Fatalf("RemoveMessagesOf(bob) = %d, %v; want 3", n, err)
	}
	if chs := e.changes(head); len(chs) != 3 || chs[0].Kind != model.MessageDeleted || chs[0].Message.ID < chs[2].Message.ID {
		t.Errorf("log of the removal = %q, want three deletions, newest first", changeStrings(chs))
	}
	after := e.post(bob.ID, "after the removal")
	if _, _, err := e.Store.Message(ctx, model.ByServer(), after.ID); err != nil {
		t.Errorf("a message written after the removal: %v", err)
	}
	if _, err := e.Store.RemoveMessagesOf(ctx, model.ByServer(), 999999); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("RemoveMessagesOf(unknown) = %v", err)
	}
	if err := e.Store.RemoveAccount(ctx, model.ByToken(adaTok), bob.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Store.Authenticate(ctx, bobTok); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("a removed account's token = %v", err)
	}
	if _, _, err := e.Store.Message(ctx, model.ByServer(), after.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("a removed account's message = %v", err)
	}
	if err := e.Store.RecordBackup(ctx, model.ByToken(adaTok)); err != nil {
		t.Fatal(err)
	}

	want := []string{
		"server grant-admin root@example.com",
		"root@example.com suspend bob@example.com",
		"root@example.com unsuspend bob@example.com",
		"root@example.com grant-admin ada@example.com",
		"ada@example.com revoke-admin root@example.com",
		fmt.Sprintf("ada@example.com delete-message bob@example.com #%d", bobs.ID),
		"ada@example.com delete-messages bob@example.com (3)",
		"ada@example.com delete-account bob@example.com",
		"ada@example.com download-backup",
	}
	if got := e.auditActs(); !slices.Equal(got, want) {
		t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Pages of the audit log, newest first.
	p1, err := e.Store.AuditLog(ctx, model.ByToken(adaTok), model.AuditQuery{Limit: 4})
	if err != nil || len(p1.Entries) != 4 || p1.NextBeforeID != p1.Entries[3].ID || p1.Entries[0].Action != model.AuditDownloadBackup {
		t.Fatalf("audit page 1 = %+v, %v", p1, err)
	}
	p2, err := e.Store.AuditLog(ctx, model.ByToken(adaTok), model.AuditQuery{Limit: 10, BeforeID: p1.NextBeforeID})
	if err != nil || len(p2.Entries) != len(want)-4 || p2.NextBeforeID != 0 {
		t.Fatalf("audit page 2 = %+v, %v", p2, err)
	}
	for _, a := range p1.Entries {
		if !a.At.Equal(e.clock.Now().Truncate(time.Microsecond)) || a.ActorID != ada.ID {
			t.Errorf("audit entry %+v: want ada's, at the store's clock", a)
		}
	}

	// Trimming: by count, then by age.
	if n, err := e.Store.TrimAudit(ctx, 0, 5); err != nil || n != len(want)-5 {
		t.Errorf("TrimAudit(keep 5) = %d, %v; want %d", n, err, len(want)-5)
	}
	if got := e.auditActs(); !slices.Equal(got, want[len(want)-5:]) {
		t.Errorf("audit log after trimming to 5 = %q", got)
	}
	e.clock.Add(2 * time.Hour)
	if n, err := e.Store.TrimAudit(ctx, time.Hour, 0); err != nil || n != 5 {
		t.Errorf("TrimAudit(an hour) = %d, %v; want 5", n, err)
	}
}

// testLastAdministratorRace: two administrators revoking each other at
// once leave one, whatever the order.
func testLastAdministratorRace(e *env) {
	t := e.t
	ctx := e.ctx()
	for round := range 10 {
		a, aTok := e.admin(fmt.Sprintf("a%d@example.com", round))
		b, bTok := e.admin(fmt.Sprintf("b%d@example.com", round))
		// Earlier rounds' survivor leaves, so a and b are the only two.
		page, err := e.Store.ListAccounts(ctx, model.ByServer(), model.AccountQuery{Limit: model.MaxAccountLimit})
		if err != nil {
			t.Fatal(err)
		}
		for _, acc := range page.Accounts {
			if acc.ID != a.ID && acc.ID != b.ID && acc.HasRole(model.RoleAdmin) {
				if _, err := e.Store.UpdateAccount(ctx, model.ByServer(), acc.ID, model.AccountUpdate{Admin: ptr(false)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, c := range []struct {
			by     model.TokenHash
			target uint64
		}{{aTok, b.ID}, {bTok, a.ID}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = e.Store.UpdateAccount(ctx, model.ByToken(c.by), c.target, model.AccountUpdate{Admin: ptr(false)})
			}()
		}
		wg.Wait()
		admins := 0
		for _, u := range []*model.User{a, b} {
			acc, err := e.Store.Account(ctx, model.ByServer(), u.ID)
			if err != nil {
				t.Fatal(err)
			}
			if acc.HasRole(model.RoleAdmin) {
				admins++
			}
		}
		if admins != 1 {
			t.Fatalf("round %d: %d administrators left (errors %v), want 1", round, admins, errs)
		}
	}
}

func testInvites(e *env) {
	t := e.t
	ctx := e.ctx()
	_, rootTok := e.admin("root@example.com")
	now := e.clock.Now().Truncate(time.Microsecond)
	bad := &model.Invite{CodeHash: TokenHash("bad"), MaxUses: 0, ExpiresAt: now.Add(time.Hour)}
	wantKind(t, "CreateInvite(no uses)", e.Store.CreateInvite(ctx, model.ByToken(rootTok), bad), model.ErrInvalid, "")
	inv := &model.Invite{CodeHash: TokenHash("two uses"), MaxUses: 2, ExpiresAt: now.Add(time.Hour)}
	if err := e.Store.CreateInvite(ctx, model.ByToken(rootTok), inv); err != nil {
		t.Fatal(err)
	}
	if inv.ID == 0 || inv.Uses != 0 || !inv.CreatedAt.Equal(now) || inv.CreatedBy == 0 {
		t.Errorf("invitation created = %+v", inv)
	}
	dup := &model.Invite{CodeHash: TokenHash("two uses"), MaxUses: 1, ExpiresAt: now.Add(time.Hour)}
	wantKind(t, "CreateInvite(a code in use)", e.Store.CreateInvite(ctx, model.ByServer(), dup), model.ErrConflict, "")
	code := TokenHash("two uses")
	register := func(email string, code model.TokenHash) error {
		_, err := e.Store.CreateUser(ctx, &model.User{Email: email, PasswordHash: FakePasswordHash}, TokenHash("reg "+email), ttl, &code)
		return err
	}
	if err := register("ada@example.com", code); err != nil {
		t.Fatal(err)
	}
	// A refused registration takes no use: the e-mail is taken.
	wantKind(t, "CreateUser(taken e-mail, invited)", register("ada@example.com", code), model.ErrConflict, "")
	if err := register("bob@example.com", code); err != nil {
		t.Fatal(err)
	}
	used := register("carol@example.com", code)
	wantKind(t, "CreateUser(used-up invitation)", used, model.ErrInvalid, "")
	if !errors.Is(used, model.ErrInvalid) || !strings.Contains(used.Error(), "invite") {
		t.Errorf("used-up invitation refused with %v", used)
	}
	wantKind(t, "CreateUser(unknown invitation)", register("carol@example.com", TokenHash("never made")), model.ErrInvalid, "")
	invs, err := e.Store.Invites(ctx, model.ByToken(rootTok))
	if err != nil || len(invs) != 1 || invs[0].Uses != 2 || invs[0].MaxUses != 2 {
		t.Fatalf("Invites = %+v, %v", invs, err)
	}

	// The last use, raced for: exactly one registration gets it.
	race := &model.Invite{CodeHash: TokenHash("one use"), MaxUses: 1, ExpiresAt: now.Add(time.Hour)}
	if err := e.Store.CreateInvite(ctx, model.ByServer(), race); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = register(fmt.Sprintf("racer%d@example.com", i), TokenHash("one use"))
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, model.ErrInvalid):
			t.Errorf("a racing registration: %v", err)
		}
	}
	if won != 1 {
		t.Errorf("%d registrations used a one-use invitation", won)
	}

	// Revoked and expired invitations are refused; the sweep removes the
	// expired.
	if err := e.Store.RevokeInvite(ctx, model.ByToken(rootTok), race.ID); err != nil {
		t.Fatal(err)
	}
	wantKind(t, "RevokeInvite(again)", e.Store.RevokeInvite(ctx, model.ByToken(rootTok), race.ID), model.ErrNotFound, "")
	soon := &model.Invite{CodeHash: TokenHash("soon"), MaxUses: 5, ExpiresAt: now.Add(time.Minute)}
	if err := e.Store.CreateInvite(ctx, model.ByServer(), soon); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Minute)
	wantKind(t, "CreateUser(expired invitation)", register("dan@example.com", TokenHash("soon")), model.ErrInvalid, "")
	if n, err := e.Store.SweepExpiredCodes(ctx); err != nil || n != 1 {
		t.Errorf("SweepExpiredCodes = %d, %v; want 1", n, err)
	}
	invs, err = e.Store.Invites(ctx, model.ByServer())
	if err != nil || len(invs) != 1 || invs[0].ID != inv.ID {
		t.Errorf("Invites after revoking and sweeping = %+v, %v", invs, err)
	}
	acts := e.auditActs()
	want := []string{"server grant-admin root@example.com", fmt.Sprintf("root@example.com create-invite invite %d", inv.ID),
		fmt.Sprintf("server create-invite invite %d", race.ID), fmt.Sprintf("root@example.com revoke-invite invite %d", race.ID),
		fmt.Sprintf("server create-invite invite %d", soon.ID)}
	if !slices.Equal(acts, want) {
		t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(acts, "\n"), strings.Join(want, "\n"))
	}
}

func testPasswordResets(e *env) {
	t := e.t
	ctx := e.ctx()
	_, rootTok := e.admin("root@example.com")
	ada, adaTok := e.user("ada@example.com")
	phone := e.login(ada, "phone")
	code := TokenHash("reset ada")
	r, err := e.Store.CreatePasswordReset(ctx, model.ByToken(rootTok), ada.ID, code, time.Hour)
	if err != nil || r.UserID != ada.ID || !r.ExpiresAt.Equal(model.TokenExpiry(e.clock.Now().Truncate(time.Microsecond), time.Hour)) {
		t.Fatalf("CreatePasswordReset = %+v, %v", r, err)
	}
	if _, err := e.Store.CreatePasswordReset(ctx, model.ByToken(adaTok), ada.ID, TokenHash("mine"), time.Hour); !errors.Is(err, model.ErrForbidden) {
		t.Errorf("a user making a reset = %v", err)
	}
	if _, err := e.Store.CreatePasswordReset(ctx, model.ByServer(), 999999, TokenHash("nobody"), time.Hour); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("a reset for an unknown account = %v", err)
	}
	got, err := e.Store.PasswordReset(ctx, code)
	if err != nil || got.UserID != ada.ID {
		t.Fatalf("PasswordReset = %+v, %v", got, err)
	}
	head, _, _ := e.Store.ChangeHead(ctx)
	if err := e.Store.ResetPassword(ctx, code, "new hash"); err != nil {
		t.Fatal(err)
	}
	u, err := e.Store.UserByEmail(ctx, "ada@example.com")
	if err != nil || u.PasswordHash != "new hash" {
		t.Errorf("after the reset: %+v, %v", u, err)
	}
	for _, tok := range []model.TokenHash{adaTok, phone} {
		if _, _, err := e.Store.Authenticate(ctx, tok); !errors.Is(err, model.ErrUnauthorized) {
			t.Errorf("a token from before the reset = %v", err)
		}
	}
	if chs := changeStrings(e.changes(head)); len(chs) != 1 || !strings.Contains(chs[0], "tokens.revoked") {
		t.Errorf("log of the reset = %q", chs)
	}
	wantKind(t, "ResetPassword(used code)", e.Store.ResetPassword(ctx, code, "again"), model.ErrInvalid, "")
	if _, err := e.Store.PasswordReset(ctx, code); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("PasswordReset(used code) = %v", err)
	}

	// A new reset replaces the old; an expired one is refused; a
	// suspension deletes it. Those the server makes (asked for by the
	// account's owner, by e-mail) are no administrator's acts: the audit
	// log, bounded by count, holds none of them.
	audited := func() int {
		t.Helper()
		p, err := e.Store.AuditLog(ctx, model.ByToken(rootTok), model.AuditQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(p.Entries)
	}
	before := audited()
	if _, err := e.Store.CreatePasswordReset(ctx, model.ByServer(), ada.ID, TokenHash("first"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if n := audited(); n != before {
		t.Errorf("a reset the server made added %d entries to the audit log", n-before)
	}
	if _, err := e.Store.CreatePasswordReset(ctx, model.ByServer(), ada.ID, TokenHash("second"), time.Hour); err != nil {
		t.Fatal(err)
	}
	wantKind(t, "ResetPassword(replaced code)", e.Store.ResetPassword(ctx, TokenHash("first"), "x"), model.ErrInvalid, "")
	e.clock.Add(time.Hour)
	wantKind(t, "ResetPassword(expired code)", e.Store.ResetPassword(ctx, TokenHash("second"), "x"), model.ErrInvalid, "")
	if n, err := e.Store.SweepExpiredCodes(ctx); err != nil || n != 1 {
		t.Errorf("SweepExpiredCodes = %d, %v; want 1", n, err)
	}
	if _, err := e.Store.CreatePasswordReset(ctx, model.ByServer(), ada.ID, TokenHash("third"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.UpdateAccount(ctx, model.ByServer(), ada.ID, model.AccountUpdate{Suspended: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	wantKind(t, "ResetPassword(suspended account's code)", e.Store.ResetPassword(ctx, TokenHash("third"), "x"), model.ErrInvalid, "")
}

func testLastSeen(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, adaTok := e.user("ada@example.com")
	created := e.clock.Now().Truncate(time.Microsecond)
	if !ada.LastSeenAt.Equal(created) {
		t.Errorf("a new account last seen %v, want its creation %v", ada.LastSeenAt, created)
	}
	e.clock.Add(time.Hour)
	e.login(ada, "later")
	a, err := e.Store.Account(ctx, model.ByServer(), ada.ID)
	if err != nil || !a.LastSeenAt.Equal(created.Add(time.Hour)) {
		t.Errorf("last seen after a login = %v, %v; want %v", a.LastSeenAt, err, created.Add(time.Hour))
	}
	e.clock.Add(time.Hour)
	if _, _, err := e.Store.Authenticate(ctx, adaTok); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.FlushTokenUses(ctx); err != nil {
		t.Fatal(err)
	}
	a, err = e.Store.Account(ctx, model.ByServer(), ada.ID)
	if err != nil || !a.LastSeenAt.Equal(created.Add(2*time.Hour)) {
		t.Errorf("last seen after a token's use = %v, %v; want %v", a.LastSeenAt, err, created.Add(2*time.Hour))
	}
	// A login after the clock stepped back leaves the later sighting.
	e.clock.Add(-30 * time.Minute)
	e.login(ada, "after the clock stepped back")
	a, err = e.Store.Account(ctx, model.ByServer(), ada.ID)
	if err != nil || !a.LastSeenAt.Equal(created.Add(2*time.Hour)) {
		t.Errorf("last seen after a login with the clock stepped back = %v, %v; want %v", a.LastSeenAt, err, created.Add(2*time.Hour))
	}
}
