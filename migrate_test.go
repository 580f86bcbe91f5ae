package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"herald/bolt"
	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
	"herald/storetest"
)

// migrationStore is what the migration test reads from both stores.
type migrationStore interface {
	storetest.Store
	Close() error
}

// TestMigrate copies the databases of older releases, upgraded by this
// one, into PostgreSQL, and checks that the copy answers as the file does:
// the same accounts, the same tokens working, the same administrators,
// the same messages, the same searches, the same change log and floor,
// the same audit log; that it goes on where the file would; and that a
// second copy into the same database is refused.
func TestMigrate(t *testing.T) {
	cluster := postgresCluster(t)
	for _, tt := range []struct {
		fixture string
		written time.Time
		admins  []string          // the --admins the release was started with
		stored  []string          // the administrators the file holds
		tokens  map[string]string // token → the e-mail it belongs to
		words   []string
		// lookAlike looks like an account's e-mail, so registering it is
		// refused; "" for none.
		lookAlike string
	}{
		{"layout5.db", time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC), nil, nil, nil, []string{"river", "apple", "hello", "tail zebra", "deleted"}, ""},
		{"layout6.db", time.Date(2026, 11, 25, 13, 50, 12, 0, time.UTC), []string{"owner@example.com"}, nil, map[string]string{
			"herald_Csgl9FA45wTmrhgj8pIxBoP8HFg20Pkbjhat5TXMFxspKZU1A": "ada@example.com",
			"herald_Mqig24Sk9ohgm-7TTYmrs_BSggeIS2E-pRhOJosIWNotToMMQ": "ada@example.com",
			"herald_ToIyE-E_RnZ7ojicHnU_YrNpY-xWs_4Tm5uePZr2ZgQjFfy2w": "owner@example.com",
		}, []string{"edited", "hello", "message"}, ""},
		// Two accounts whose e-mails look alike: root@example.com and
		// ｒoot@example.com, kept as they are by the upgrade to layout 8.
		{"layout7.db", time.Date(2026, 11, 28, 1, 10, 20, 0, time.UTC), nil, []string{"owner@example.com"}, map[string]string{
			"herald_aYkc0Raok8WZsB4Owvl8B9V4dw8KpVTVjLxGCMOdBucwSYg5w": "ada@example.com",
			"herald_76rB4UND06S_0Xj6rcexcWjOHsozIb0462D4BsVOdbwUbqoIQ": "owner@example.com",
			"herald_uPGETYfQDyhTXguW0bi54t4nTM0tPHrw0UavrVL2cY4fMUF6Q": "root@example.com",
			"herald_ebw7RQzLz-2wu42-vMpNpBdN3NWoKJoj-774HEDji1U4OySiQ": "\uff52oot@example.com",
		}, []string{"hello", "final", "root", "second"}, "r\u1d0fot@example.com"},
	} {
		t.Run(tt.fixture, func(t *testing.T) {
			ctx := context.Background()
			clock := storetest.NewClock()
			clock.Add(tt.written.Add(time.Hour).Sub(clock.Now()))
			path := filepath.Join(t.TempDir(), "herald.db")
			src, err := os.ReadFile(filepath.Join("bolt", "testdata", tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, src, 0o600); err != nil {
				t.Fatal(err)
			}
			// As an operator would: this release opens the file once, with
			// the --admins the old one had, which the upgrade stores.
			upgraded, err := bolt.Open(path, bolt.Options{Now: clock.Now, LegacyAdmins: tt.admins})
			if err != nil {
				t.Fatal(err)
			}
			if err := upgraded.Close(); err != nil {
				t.Fatal(err)
			}

			url := cluster.Database(t)
			code, out, errOut := runArgs(t, "migrate", "--db", path, "--to", url)
			if code != 0 {
				t.Fatalf("migrate = %d\n%s%s", code, out, errOut)
			}
			for _, want := range []string{"copied " + path, "users", "tokens", "messages", "changes"} {
				if !strings.Contains(out, want) {
					t.Errorf("migrate's report lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "DIFFERENT") || !strings.Contains(out, "\n  every count agrees\n") {
				t.Errorf("migrate reports different counts:\n%s", out)
			}
			// Analysed, so searches are planned from the terms' statistics
			// from the first one on.
			if n, err := pgtest.QueryInt(ctx, url, `SELECT count(*) FROM pg_stats WHERE tablename = 'messages' AND attname = 'terms'`); err != nil || n != 1 {
				t.Errorf("statistics of the migrated messages' terms: %d rows, %v; want 1", n, err)
			}
			code, _, errOut = runArgs(t, "migrate", "--db", path, "--to", url)
			if code != 1 || !strings.Contains(errOut, "is not empty") {
				t.Errorf("a second migrate into the same database = %d, %q; want it refused", code, errOut)
			}

			file, db := openMigrated(t, path, url, clock.Now)
			stores := []migrationStore{file, db}
			compareStores(t, stores, tt.words)
			for token, email := range tt.tokens {
				for i, s := range stores {
					u, tok, err := s.Authenticate(ctx, sha256.Sum256([]byte(token)))
					if err != nil || u.Email != email {
						t.Errorf("store %d: the fixture's token of %s: %v, %v", i, email, u, err)
						continue
					}
					toks, err := s.Tokens(ctx, u.ID)
					if err != nil || !slices.ContainsFunc(toks, func(x *model.Token) bool {
						return x.ID == tok.ID && x.CreatedAt.Equal(tok.CreatedAt) && x.ExpiresAt.Equal(tok.ExpiresAt)
					}) {
						t.Errorf("store %d: token list of %s lacks the token: %v", i, email, err)
					}
					// Only the administrators the upgrade made may administer.
					_, err = s.ListAccounts(ctx, model.ByToken(sha256.Sum256([]byte(token))), model.AccountQuery{})
					if admin := slices.Contains(tt.admins, email) || slices.Contains(tt.stored, email); (admin && err != nil) || (!admin && !errors.Is(err, model.ErrForbidden)) {
						t.Errorf("store %d: ListAccounts by the token of %s = %v; administrator: %t", i, email, err, admin)
					}
				}
			}
			// Both go on the same way: the next message gets the same ID
			// and change position in each.
			owner, err := file.UserByEmail(ctx, "ada@example.com")
			if err != nil {
				t.Fatal(err)
			}
			var next []string
			for _, s := range stores {
				m, err := s.CreateMessage(ctx, model.ByUser(owner.ID), "after the migration")
				if err != nil {
					t.Fatal(err)
				}
				head, _, _ := s.ChangeHead(ctx)
				next = append(next, fmt.Sprintf("message %d at position %d", m.ID, head))
			}
			if next[0] != next[1] {
				t.Errorf("after the copy, the file creates %s and PostgreSQL %s", next[0], next[1])
			}
			// A new account does not take a deleted one's ID.
			for i, s := range stores {
				u := &model.User{Email: "new@example.com", PasswordHash: storetest.FakePasswordHash}
				if _, err := s.CreateUser(ctx, u, storetest.TokenHash(fmt.Sprint("new ", i)), time.Hour, nil); err != nil {
					t.Fatal(err)
				}
				next = append(next, fmt.Sprint(u.ID))
			}
			if next[2] != next[3] {
				t.Errorf("the next account is %s in the file and %s in PostgreSQL", next[2], next[3])
			}
			if tt.lookAlike != "" {
				for i, s := range stores {
					u := &model.User{Email: tt.lookAlike, PasswordHash: storetest.FakePasswordHash}
					_, err := s.CreateUser(ctx, u, storetest.TokenHash(fmt.Sprint("look-alike ", i)), time.Hour, nil)
					if want := model.EmailLookAlike(tt.lookAlike); err == nil || err.Error() != want.Error() {
						t.Errorf("store %d: registering %s = %v, want %v", i, tt.lookAlike, err, want)
					}
				}
			}

		})
	}
}

// openMigrated opens the file migrated from and the database migrated
// to, side by side, both closed when the test ends.
func openMigrated(t *testing.T, path, url string, now func() time.Time) (*bolt.DB, *pg.DB) {
	t.Helper()
	file, err := bolt.Open(path, bolt.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := file.Close(); err != nil {
			t.Error(err)
		}
	})
	db, err := pg.Open(context.Background(), url, pg.Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return file, db
}

// TestMigratePeople copies a file holding threads, mentions and
// notifications, some read, one about a deleted reply, one dropped by a
// deleted account: on PostgreSQL the messages answer and mention what
// they did and count the same replies, every account lists the same
// notifications with the same unread counts, the change log resolves the
// same notifications, and the next reply notifies with the same ID.
func TestMigratePeople(t *testing.T) {
	url := postgresCluster(t).Database(t)
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "herald.db")
	file, err := bolt.Open(path, bolt.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	people := map[string]*model.User{}
	for _, h := range []string{"ada", "bob", "carol", "dan"} {
		u := &model.User{Email: h + "@example.com", Handle: h, PasswordHash: storetest.FakePasswordHash}
		if _, err := file.CreateUser(ctx, u, storetest.TokenHash("register "+h), time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		people[h] = u
	}
	by := func(h string) model.Caller { return model.ByUser(people[h].ID) }
	post := func(h string, replyTo uint64, content string) *model.Message {
		t.Helper()
		clock.Add(time.Second)
		m, err := file.PostMessage(ctx, by(h), model.Draft{Content: content, ReplyTo: replyTo}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	root := post("ada", 0, "a question for @bob and @carol")
	answer := post("bob", root.ID, "an answer")
	post("carol", answer.ID, "@ada, see @bob's answer")
	gone := post("dan", root.ID, "a reply to be deleted")
	post("dan", 0, "hi @ada")
	edited := post("carol", root.ID, "thanks")
	text := "thanks @dan"
	if _, err := file.UpdateMessage(ctx, edited.ID, by("carol"), model.MessageUpdate{Content: &text}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := file.DeleteMessage(ctx, gone.ID, by("dan"), nil); err != nil {
		t.Fatal(err)
	}
	page, err := file.Notifications(ctx, by("ada"), model.NotificationQuery{})
	if err != nil || len(page.Items) < 3 {
		t.Fatalf("ada's notifications in the file: %+v, %v", page, err)
	}
	if err := file.MarkNotificationsRead(ctx, by("ada"), page.Items[2].ID); err != nil {
		t.Fatal(err)
	}
	if err := file.MarkNotificationsRead(ctx, by("bob"), 0); err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}

	if code, out, errOut := runArgs(t, "migrate", "--db", path, "--to", url); code != 0 || !strings.Contains(out, "notifications") {
		t.Fatalf("migrate = %d\n%s%s", code, out, errOut)
	}
	file, db := openMigrated(t, path, url, clock.Now)
	stores := []migrationStore{file, db}
	handles := []string{"ada", "bob", "carol", "dan"}
	seen := func(s migrationStore) []string {
		t.Helper()
		var out []string
		for id := uint64(1); id <= edited.ID; id++ {
			_, m, err := s.Message(ctx, model.ByServer(), id)
			if errors.Is(err, model.ErrNotFound) {
				out = append(out, fmt.Sprintf("message %d gone", id))
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("message %d by @%s replyTo %d replies %d mentions %v", m.ID, m.OwnerHandle, m.ReplyTo, m.Replies, m.Mentions))
			r, err := s.Replies(ctx, by("ada"), model.RepliesQuery{MessageID: id})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range r.Messages {
				out = append(out, fmt.Sprintf("  reply %d", x.ID))
			}
		}
		for _, h := range handles {
			p, err := s.Notifications(ctx, by(h), model.NotificationQuery{})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("@%s: %d unread", h, p.Unread))
			for _, n := range p.Items {
				msg := "gone"
				if n.Message != nil {
					msg = fmt.Sprintf("%d %q replies %d", n.Message.ID, n.Message.Content, n.Message.Replies)
				}
				out = append(out, fmt.Sprintf("  %d %s by @%s %s read=%t at %s", n.ID, n.Kind, n.Actor.Handle, msg, n.Read, n.At))
			}
		}
		chs, _, err := s.ChangesAfter(ctx, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		// Gone changes, which no stream is sent, only as gone: PostgreSQL
		// no longer knows what a notification whose row went said, nor
		// what a message gone mentioned.
		for _, ch := range chs {
			switch {
			case ch.Kind != model.NotificationCreated && ch.Gone:
				out = append(out, fmt.Sprintf("change %s replyTo %d", storetest.ChangeString(ch), ch.Message.ReplyTo))
			case ch.Kind != model.NotificationCreated:
				out = append(out, fmt.Sprintf("change %s replyTo %d mentions %v", storetest.ChangeString(ch), ch.Message.ReplyTo, ch.Message.Mentions))
			case ch.Gone:
				out = append(out, fmt.Sprintf("change %d notifies %d on %d: gone", ch.Seq, ch.UserID, ch.Notification.MessageID))
			default:
				n := ch.Notification
				out = append(out, fmt.Sprintf("change %d notifies %d: %s by @%s on %d read=%t", ch.Seq, ch.UserID, n.Kind, n.Actor.Handle, n.MessageID, n.Read))
			}
		}
		return out
	}
	before := [2][]string{seen(file), seen(db)}
	if !slices.Equal(before[0], before[1]) {
		t.Errorf("after the copy, the file reads\n%s\nand PostgreSQL\n%s", strings.Join(before[0], "\n"), strings.Join(before[1], "\n"))
	}
	// Both go on the same way: the next reply's notification, and the
	// notifications of an account deleted, on both.
	for _, s := range stores {
		if _, err := s.PostMessage(ctx, by("bob"), model.Draft{Content: "more, @dan", ReplyTo: root.ID}, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteAccount(ctx, by("carol")); err != nil {
			t.Fatal(err)
		}
	}
	handles = slices.DeleteFunc(handles, func(h string) bool { return h == "carol" })
	after := [2][]string{seen(file), seen(db)}
	if !slices.Equal(after[0], after[1]) {
		t.Errorf("after a reply and an account's deletion on both, the file reads\n%s\nand PostgreSQL\n%s", strings.Join(after[0], "\n"), strings.Join(after[1], "\n"))
	}
}

// TestMigrateAdministration copies a file holding what administrators
// make: an administrator made on the server's machine, a suspended
// account, an invitation partly used and one revoked, an outstanding
// password reset, removed messages, the audit log of all of it, and the
// certificate and ACME account HTTPS kept. On
// PostgreSQL, as in the file, each goes on working as it did, and new
// invitations and audit entries take IDs after the copied ones.
func TestMigrateAdministration(t *testing.T) {
	url := postgresCluster(t).Database(t)
	ctx := context.Background()
	clock := storetest.NewClock()
	path := filepath.Join(t.TempDir(), "herald.db")
	file, err := bolt.Open(path, bolt.Options{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	register := func(s migrationStore, email string, invite *model.TokenHash) (*model.User, error) {
		u := &model.User{Email: email, PasswordHash: storetest.FakePasswordHash}
		_, err := s.CreateUser(ctx, u, storetest.TokenHash("register "+email), time.Hour, invite)
		return u, err
	}
	mustRegister := func(email string, invite *model.TokenHash) *model.User {
		t.Helper()
		u, err := register(file, email, invite)
		if err != nil {
			t.Fatalf("registering %s: %v", email, err)
		}
		return u
	}
	root := &model.User{Email: "root@example.com", PasswordHash: storetest.FakePasswordHash}
	if err := file.CreateAdministrator(ctx, root); err != nil {
		t.Fatal(err)
	}
	rootToken := storetest.TokenHash("root login")
	if _, err := file.IssueLoginToken(ctx, root.ID, root.PasswordHash, rootToken, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	byRoot := model.ByToken(rootToken)
	ada, bob := mustRegister("ada@example.com", nil), mustRegister("bob@example.com", nil)
	clock.Add(time.Minute)
	suspend := true
	if _, err := file.UpdateAccount(ctx, byRoot, bob.ID, model.AccountUpdate{Suspended: &suspend}); err != nil {
		t.Fatal(err)
	}
	invite := &model.Invite{MaxUses: 3, ExpiresAt: clock.Now().Add(model.DefaultInviteLifetime), CodeHash: storetest.TokenHash("invite code")}
	revoked := &model.Invite{MaxUses: 1, ExpiresAt: clock.Now().Add(time.Hour), CodeHash: storetest.TokenHash("revoked code")}
	for _, inv := range []*model.Invite{invite, revoked} {
		if err := file.CreateInvite(ctx, byRoot, inv); err != nil {
			t.Fatal(err)
		}
	}
	if err := file.RevokeInvite(ctx, byRoot, revoked.ID); err != nil {
		t.Fatal(err)
	}
	carol := mustRegister("carol@example.com", &invite.CodeHash)
	for _, content := range []string{"spam", "more spam"} {
		if _, err := file.CreateMessage(ctx, model.ByUser(carol.ID), content); err != nil {
			t.Fatal(err)
		}
	}
	clock.Add(time.Minute)
	if n, err := file.RemoveMessagesOf(ctx, byRoot, carol.ID); err != nil || n != 2 {
		t.Fatalf("RemoveMessagesOf = %d, %v", n, err)
	}
	// Made with an Idempotency-Key, whose record the copy keeps: a retry
	// on PostgreSQL gets the answer the file gave.
	hello, err := file.CreateMessageWithKey(ctx, model.ByUser(ada.ID), "hello after the spam", storetest.Key("hello", "hello after the spam"))
	if err != nil {
		t.Fatal(err)
	}
	settings := model.Settings{model.SettingRegistration: "invite", model.SettingWritesPerAccount: "10/1m"}
	if _, err := file.UpdateSettings(ctx, byRoot, settings); err != nil {
		t.Fatal(err)
	}
	resetCode := storetest.TokenHash("reset code")
	if _, err := file.CreatePasswordReset(ctx, byRoot, ada.ID, resetCode, model.DefaultResetLifetime); err != nil {
		t.Fatal(err)
	}
	// A certificate and the ACME account HTTPS kept: the instances on
	// PostgreSQL serve it without ordering another.
	certs := map[string][]byte{"herald.example.com": []byte("-----BEGIN EC PRIVATE KEY-----\n"), "acme_account+key": {0, 1, 2}}
	for name, data := range certs {
		if err := file.PutCert(ctx, name, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runArgs(t, "migrate", "--db", path, "--to", url)
	if code != 0 {
		t.Fatalf("migrate = %d\n%s%s", code, out, errOut)
	}
	for name, n := range map[string]int{"users": 4, "invitations": 1, "password resets": 1, "audit entries": 8, "idempotency keys": 1, "certificates": 2} {
		if !regexp.MustCompile(`(?m)^  ` + name + ` +` + fmt.Sprint(n) + ` +` + fmt.Sprint(n) + `$`).MatchString(out) {
			t.Errorf("migrate's report lacks %d %s in both:\n%s", n, name, out)
		}
	}

	file, db := openMigrated(t, path, url, clock.Now)
	stores := []migrationStore{file, db}
	compareStores(t, stores, []string{"spam", "hello"})
	for name, want := range certs {
		if got, err := db.Cert(ctx, name); err != nil || !bytes.Equal(got, want) {
			t.Errorf("PostgreSQL's %s = %q, %v; want the file's %q", name, got, err, want)
		}
	}
	page, err := db.AuditLog(ctx, model.ByServer(), model.AuditQuery{})
	if err != nil || len(page.Entries) != 8 || page.Entries[0].Action != model.AuditPasswordReset || page.Entries[0].ActorEmail != root.Email ||
		page.Entries[7].Action != model.AuditGrantAdmin || page.Entries[7].ActorID != 0 {
		t.Fatalf("PostgreSQL's audit log = %+v, %v; want the file's eight entries", page, err)
	}
	if e := page.Entries[1]; e.Action != model.AuditUpdateSettings || !maps.Equal(e.Settings, settings) {
		t.Errorf("PostgreSQL's audit entry of the settings change = %+v, want it to name %v", e, settings)
	}
	if got, err := db.Settings(ctx); err != nil || !maps.Equal(got, settings) {
		t.Errorf("PostgreSQL's settings = %v, %v; want the file's %v", got, err, settings)
	}
	migratedAudit := page.Entries[0].ID

	var next []string
	for i, s := range stores {
		if _, err := s.IssueLoginToken(ctx, bob.ID, bob.PasswordHash, storetest.TokenHash(fmt.Sprint("bob ", i)), time.Hour); !errors.Is(err, model.ErrForbidden) {
			t.Errorf("store %d: the suspended account's login = %v, want ErrForbidden", i, err)
		}
		if p, err := s.ListAccounts(ctx, byRoot, model.AccountQuery{}); err != nil || len(p.Accounts) != 4 {
			t.Errorf("store %d: ListAccounts by the administrator's token = %+v, %v", i, p, err)
		}
		adaToken := model.ByToken(storetest.TokenHash("register ada@example.com"))
		if _, err := s.ListAccounts(ctx, adaToken, model.AccountQuery{}); !errors.Is(err, model.ErrForbidden) {
			t.Errorf("store %d: ListAccounts by a user's token = %v, want ErrForbidden", i, err)
		}

		invites, err := s.Invites(ctx, byRoot)
		if err != nil || len(invites) != 1 || invites[0].ID != invite.ID || invites[0].Uses != 1 || invites[0].MaxUses != 3 {
			t.Errorf("store %d: Invites = %+v, %v; want invitation %d used once of three", i, invites, err, invite.ID)
		}
		for _, email := range []string{"dave@example.com", "erin@example.com"} {
			if _, err := register(s, email, &invite.CodeHash); err != nil {
				t.Errorf("store %d: registering %s with the invitation's remaining uses: %v", i, email, err)
			}
		}
		for _, c := range []model.TokenHash{invite.CodeHash, revoked.CodeHash} {
			if _, err := register(s, "frank@example.com", &c); !errors.Is(err, model.ErrInvalid) {
				t.Errorf("store %d: registering with a used-up or revoked invitation: %v, want refused", i, err)
			}
		}

		if m, err := s.CreateMessageWithKey(ctx, model.ByUser(ada.ID), "hello after the spam", storetest.Key("hello", "hello after the spam")); err != nil || !reflect.DeepEqual(*m, *hello) {
			t.Errorf("store %d: the retry of a create made with a key = %+v, %v; want the file's first answer %+v", i, m, err, hello)
		}

		if r, err := s.PasswordReset(ctx, resetCode); err != nil || r.UserID != ada.ID {
			t.Errorf("store %d: PasswordReset = %+v, %v; want ada's", i, r, err)
		}
		if err := s.ResetPassword(ctx, resetCode, "new hash"); err != nil {
			t.Errorf("store %d: ResetPassword = %v", i, err)
		}
		if _, err := s.IssueLoginToken(ctx, ada.ID, "new hash", storetest.TokenHash(fmt.Sprint("ada ", i)), time.Hour); err != nil {
			t.Errorf("store %d: ada's login with the new password: %v", i, err)
		}
		if err := s.ResetPassword(ctx, resetCode, "again"); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("store %d: the reset code used twice: %v, want refused", i, err)
		}

		// Past the revoked invitation's ID, and after the last entry.
		later := &model.Invite{MaxUses: 1, ExpiresAt: clock.Now().Add(time.Hour), CodeHash: storetest.TokenHash("later")}
		if err := s.CreateInvite(ctx, byRoot, later); err != nil {
			t.Fatalf("store %d: CreateInvite after the copy: %v", i, err)
		}
		p, err := s.AuditLog(ctx, byRoot, model.AuditQuery{Limit: 1})
		if err != nil || len(p.Entries) != 1 || p.Entries[0].InviteID != later.ID {
			t.Fatalf("store %d: the audit log's newest = %+v, %v; want the new invitation's", i, p, err)
		}
		if later.ID <= revoked.ID || p.Entries[0].ID <= migratedAudit {
			t.Errorf("store %d: new invitation %d, new audit entry %d; want them after %d and %d", i, later.ID, p.Entries[0].ID, revoked.ID, migratedAudit)
		}
		next = append(next, fmt.Sprintf("invitation %d, audit entry %d", later.ID, p.Entries[0].ID))
	}
	if next[0] != next[1] {
		t.Errorf("after the copy, the file creates %s and PostgreSQL %s", next[0], next[1])
	}
}

// compareStores checks that the stores answer alike: accounts with their
// suspensions and last sightings, the audit log, invitations, messages,
// searches by owner and by words, and the change log with its floor.
func compareStores(t *testing.T, stores []migrationStore, words []string) {
	t.Helper()
	ctx := context.Background()
	answers := make([][]string, len(stores))
	for i, s := range stores {
		var lines []string
		add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
		page := func(q model.SearchQuery) {
			for pages := 0; pages < 1000; pages++ {
				_, p, err := s.SearchMessages(ctx, model.ByServer(), q)
				if err != nil {
					add("search %+v: %v", q, err)
					return
				}
				for _, m := range p.Messages {
					add("%+v: %d %d %s %q %s %s r%d", q, m.ID, m.OwnerID, m.OwnerEmail, m.Content, m.CreatedAt, m.UpdatedAt, m.Revision)
				}
				if p.NextBeforeID == 0 {
					return
				}
				q.BeforeID = p.NextBeforeID
			}
		}
		page(model.SearchQuery{Limit: 3})
		var owners []string
		for id := uint64(1); id < 20; id++ {
			u, err := s.UserByID(ctx, id)
			if errors.Is(err, model.ErrNotFound) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			add("user %d %s %s %v %s suspended=%t seen=%s", u.ID, u.Email, u.PasswordHash, u.Roles, u.CreatedAt, u.Suspended, u.LastSeenAt)
			owners = append(owners, u.Email)
		}
		for q := (model.AuditQuery{Limit: 2}); ; {
			p, err := s.AuditLog(ctx, model.ByServer(), q)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Entries {
				add("audit %d at %s: %s by %d %s on %d %s message %d invite %d count %d", e.ID, e.At, e.Action,
					e.ActorID, e.ActorEmail, e.UserID, e.UserEmail, e.MessageID, e.InviteID, e.Count)
			}
			if p.NextBeforeID == 0 {
				break
			}
			q.BeforeID = p.NextBeforeID
		}
		invites, err := s.Invites(ctx, model.ByServer())
		if err != nil {
			t.Fatal(err)
		}
		for _, inv := range invites {
			add("invite %d %x uses %d/%d created %s by %d expires %s", inv.ID, inv.CodeHash, inv.Uses, inv.MaxUses,
				inv.CreatedAt, inv.CreatedBy, inv.ExpiresAt)
		}
		for _, email := range owners {
			page(model.SearchQuery{OwnerEmail: strings.ToUpper(email), Limit: 2})
			for _, w := range words {
				page(model.SearchQuery{OwnerEmail: email, Terms: model.Terms(w)})
			}
		}
		for _, w := range words {
			page(model.SearchQuery{Terms: model.Terms(w)})
		}
		head, _, err := s.ChangeHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		floor := uint64(0)
		for floor < head {
			if _, _, err := s.ChangesAfter(ctx, floor, 1); !errors.Is(err, model.ErrChangeUnknown) {
				break
			}
			floor++
		}
		chs, _, err := s.ChangesAfter(ctx, floor, 1000)
		if err != nil {
			t.Fatal(err)
		}
		add("head %d, floor %d", head, floor)
		for _, ch := range chs {
			add("%s at %s", storetest.ChangeString(ch), ch.At)
		}
		answers[i] = lines
	}
	if len(answers[0]) < 5 {
		t.Fatalf("the file answered too little to prove anything:\n%s", strings.Join(answers[0], "\n"))
	}
	if !slices.Equal(answers[0], answers[1]) {
		t.Errorf("the copy answers differently:\nfile:\n%s\npostgres:\n%s", strings.Join(answers[0], "\n"), strings.Join(answers[1], "\n"))
	}
}

func TestMigrateRefuses(t *testing.T) {
	cluster := postgresCluster(t)
	url := cluster.Database(t)
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"FromURL", []string{"--db", url, "--to", url}, 2, "names the bbolt file"},
		{"ToFile", []string{"--db", "herald.db", "--to", "other.db"}, 2, "--to must be a PostgreSQL URL"},
		{"Extra", []string{"--db", "herald.db", "--to", url, "extra"}, 2, "unexpected argument"},
		{"Missing", []string{"--db", filepath.Join(t.TempDir(), "none.db"), "--to", url}, 1, "does not exist"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runArgs(t, append([]string{"migrate"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("migrate %v = %d, %q; want %d and %q", tt.args, code, errOut, tt.code, tt.want)
			}
		})
	}
	t.Run("Running", func(t *testing.T) {
		path := seedDB(t, 3)
		db, err := bolt.Open(path, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		code, _, errOut := runArgs(t, "migrate", "--db", path, "--to", url)
		if code != 1 || !strings.Contains(errOut, "in use by another process") {
			t.Errorf("migrate of a file in use = %d, %q", code, errOut)
		}
	})
	t.Run("AuditOnly", func(t *testing.T) {
		// A database whose only Herald data is an audit entry is not empty:
		// the copy would collide with it, or lose it.
		url := cluster.Database(t)
		db, err := pg.Open(context.Background(), url, pg.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = db.RecordBackup(context.Background(), model.ByServer())
		if err := errors.Join(err, db.Close()); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runArgs(t, "migrate", "--db", seedDB(t, 3), "--to", url)
		if code != 1 || !strings.Contains(errOut, "is not empty") || !strings.Contains(errOut, "it holds 1 audit entry. ") {
			t.Errorf("migrate into a database holding an audit entry = %d, %q; want it refused", code, errOut)
		}
	})
	t.Run("UnfinishedRemoval", func(t *testing.T) {
		url := cluster.Database(t)
		path := seedDB(t, 3)
		// As a crash leaves an administrator's removal of ada's messages:
		// the mark written, the messages not yet removed.
		raw, err := bbolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = raw.Update(func(tx *bbolt.Tx) error {
			return tx.Bucket([]byte("purging")).Put(binary.BigEndian.AppendUint64(nil, 1), binary.BigEndian.AppendUint64(nil, 3))
		})
		if err := errors.Join(err, raw.Close()); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runArgs(t, "migrate", "--db", path, "--to", url)
		if code != 1 || !strings.Contains(errOut, "removal of the messages of account 1 is unfinished") ||
			!strings.Contains(errOut, "start this Herald on it once") {
			t.Fatalf("migrate of a file with an unfinished removal = %d, %q", code, errOut)
		}
		// As told: this Herald, started and stopped once, finishes it.
		db, err := bolt.Open(path, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if code, out, errOut := runArgs(t, "migrate", "--db", path, "--to", url); code != 0 {
			t.Fatalf("migrate once the removal is finished = %d\n%s%s", code, out, errOut)
		}
		for owner, want := range map[int64]int64{1: 0, 2: 1} {
			n, err := pgtest.QueryInt(context.Background(), url, "SELECT count(*) FROM messages WHERE owner_id = $1", owner)
			if err != nil || n != want {
				t.Errorf("account %d's messages in PostgreSQL = %d, %v; want %d", owner, n, err, want)
			}
		}
	})
	t.Run("Help", func(t *testing.T) {
		code, out, _ := runArgs(t, "migrate", "--help")
		if code != 0 || !strings.Contains(out, "Usage: herald migrate --db FILE --to URL") {
			t.Errorf("migrate --help = %d, %q", code, out)
		}
	})
}
