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

// exportAll exports db, read as a snapshot, and lists what the visitor
// received, one line per record, in the order it came.
func exportAll(tb testing.TB, db *testDB) ([]string, Exported, error) {
	tb.Helper()
	var got []string
	add := func(format string, args ...any) error {
		got = append(got, fmt.Sprintf(format, args...))
		return nil
	}
	snap := &Snapshot{bolt: db.bolt}
	out, err := snap.Export(Visitor{
		User: func(u *model.User) error {
			return add("user %d %s %v suspended=%t seen=%s", u.ID, u.Email, u.Roles, u.Suspended, u.LastSeenAt)
		},
		Token:   func(t *model.Token) error { return add("token of %d", t.UserID) },
		Message: func(m *model.Message) error { return add("message %d", m.ID) },
		Change:  func(ch *model.Change) error { return add("change %d", ch.Seq) },
		Invite: func(inv *model.Invite) error {
			return add("invite %d %x uses %d/%d by %d", inv.ID, inv.CodeHash[:4], inv.Uses, inv.MaxUses, inv.CreatedBy)
		},
		Reset: func(r *model.PasswordReset) error {
			return add("reset %x of %d until %s", r.CodeHash[:4], r.UserID, r.ExpiresAt)
		},
		Audit: func(e *model.AuditEntry) error {
			return add("audit %d %s by %d on %d at %s", e.ID, e.Action, e.ActorID, e.UserID, e.At)
		},
		Notification: func(n *model.Notification) error {
			return add("notification %d of %d: %s by %d on %d", n.ID, n.UserID, n.Kind, n.Actor.ID, n.MessageID)
		},
		NotificationMark: func(userID, readUpTo uint64) error { return add("notifications of %d read up to %d", userID, readUpTo) },
		Cert:             func(name string, data []byte) error { return add("cert %s of %d bytes", name, len(data)) },
		Settings: func(s model.Settings) error {
			if len(s) == 0 {
				return nil
			}
			return add("settings %v", s)
		},
	})
	return got, out, err
}

// TestExportAdministration: Export hands over suspensions and last
// sightings with the accounts, then invitations with their uses, password
// resets and the audit log, after the change log; and the invitation and
// audit sequences, which a revoked invitation leaves above the highest ID
// exported.
func TestExportAdministration(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	root, rootTok := mustAdmin(t, db, "root@example.com")
	db.Clock.Add(time.Minute)
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	mustCreateMessage(t, db, ada.ID, "hello")
	by := model.ByToken(rootTok)
	if _, err := db.UpdateAccount(ctx, by, bob.ID, model.AccountUpdate{Suspended: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	kept := &model.Invite{MaxUses: 3, ExpiresAt: db.clock().Add(time.Hour), CodeHash: tokenHash("kept")}
	revoked := &model.Invite{MaxUses: 1, ExpiresAt: db.clock().Add(time.Hour), CodeHash: tokenHash("revoked")}
	for _, inv := range []*model.Invite{kept, revoked} {
		if err := db.CreateInvite(ctx, by, inv); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RevokeInvite(ctx, by, revoked.ID); err != nil {
		t.Fatal(err)
	}
	carol := &model.User{Email: "carol@example.com", PasswordHash: fakePasswordHash}
	code := kept.CodeHash
	if _, err := db.CreateUser(ctx, carol, tokenHash("carol"), defaultTTL, &code); err != nil {
		t.Fatal(err)
	}
	reset, err := db.CreatePasswordReset(ctx, by, ada.ID, tokenHash("reset"), time.Hour)
	if err != nil {
		t.Fatal(err)
	}

	got, out, err := exportAll(t, db)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		fmt.Sprintf("user %d root@example.com [%s %s] suspended=false seen=%s", root.ID, model.RoleUser, model.RoleAdmin, root.LastSeenAt),
		fmt.Sprintf("user %d ada@example.com [%s] suspended=false seen=%s", ada.ID, model.RoleUser, ada.LastSeenAt),
		fmt.Sprintf("user %d bob@example.com [%s] suspended=true seen=%s", bob.ID, model.RoleUser, bob.LastSeenAt),
		fmt.Sprintf("user %d carol@example.com [%s] suspended=false seen=%s", carol.ID, model.RoleUser, carol.LastSeenAt),
	}
	if !slices.Equal(got[:len(want)], want) {
		t.Errorf("export begins:\n%s\nwant:\n%s", strings.Join(got[:len(want)], "\n"), strings.Join(want, "\n"))
	}
	now := db.clock()
	want = []string{
		fmt.Sprintf("change %d", out.ChangesHead),
		fmt.Sprintf("invite %d %x uses 1/3 by %d", kept.ID, kept.CodeHash[:4], root.ID),
		fmt.Sprintf("reset %x of %d until %s", reset.CodeHash[:4], ada.ID, reset.ExpiresAt),
		fmt.Sprintf("audit 1 %s by 0 on %d at %s", model.AuditGrantAdmin, root.ID, root.CreatedAt),
		fmt.Sprintf("audit 2 %s by %d on %d at %s", model.AuditSuspend, root.ID, bob.ID, now),
		fmt.Sprintf("audit 3 %s by %d on 0 at %s", model.AuditCreateInvite, root.ID, now),
		fmt.Sprintf("audit 4 %s by %d on 0 at %s", model.AuditCreateInvite, root.ID, now),
		fmt.Sprintf("audit 5 %s by %d on 0 at %s", model.AuditRevokeInvite, root.ID, now),
		fmt.Sprintf("audit 6 %s by %d on %d at %s", model.AuditPasswordReset, root.ID, ada.ID, now),
	}
	if tail := got[len(got)-len(want):]; !slices.Equal(tail, want) {
		t.Errorf("export ends:\n%s\nwant:\n%s", strings.Join(tail, "\n"), strings.Join(want, "\n"))
	}
	wantOut := Exported{UsersSeq: 4, MessagesSeq: 1, InvitesSeq: 2, AuditSeq: 6, ChangesHead: out.ChangesHead,
		Changes: out.Changes, Invites: 1, Resets: 1, Audit: 6}
	if out != wantOut || out.ChangesHead == 0 || out.Changes == 0 {
		t.Errorf("Export = %+v, want %+v", out, wantOut)
	}
}

// TestExportNotifications: Export hands over every notification as
// stored, after the idempotency records, and every account's read mark.
func TestExportNotifications(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	ada, adaTok := mustCreateUser(t, db, "ada@example.com")
	bob, _ := mustCreateUser(t, db, "bob@example.com")
	root := mustCreateMessage(t, db, ada.ID, "a question")
	reply, err := db.PostMessage(ctx, model.ByUser(bob.ID), model.Draft{Content: "an answer", ReplyTo: root.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mention := mustCreateMessage(t, db, bob.ID, "hi @ada")
	if err := db.MarkNotificationsRead(ctx, model.ByToken(adaTok), 0); err != nil {
		t.Fatal(err)
	}
	got, out, err := exportAll(t, db)
	if err != nil {
		t.Fatal(err)
	}
	var notified []string
	for _, line := range got {
		if strings.HasPrefix(line, "notification") {
			notified = append(notified, line)
		}
	}
	head := out.ChangesHead
	want := []string{
		fmt.Sprintf("notification %d of %d: reply by %d on %d", head-2, ada.ID, bob.ID, reply.ID),
		fmt.Sprintf("notification %d of %d: mention by %d on %d", head, ada.ID, bob.ID, mention.ID),
		fmt.Sprintf("notifications of %d read up to %d", ada.ID, head),
	}
	if !slices.Equal(notified, want) || out.Notifications != 2 {
		t.Errorf("exported %q, %d notifications; want %q, 2", notified, out.Notifications, want)
	}
}

// TestExportRefusesUnfinishedRemovals: a file where an account's deletion
// or an administrator's removal of an account's messages was cut short is
// refused, naming what is unfinished; Open finishes it, and the file is
// exported then.
func TestExportRefusesUnfinishedRemovals(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	ada, _ := mustCreateUser(t, db, "ada@example.com")
	m := mustCreateMessage(t, db, ada.ID, "removed by an administrator")
	for _, tt := range []struct {
		bucket []byte
		value  []byte
		want   string
	}{
		{bucketPurging, itob(m.ID), fmt.Sprintf("an administrator's removal of the messages of account %d is unfinished", ada.ID)},
		{bucketDeleting, []byte("gone@example.com"), "the deletion of account 99 is unfinished"},
	} {
		key := ada.ID
		if string(tt.bucket) == string(bucketDeleting) {
			key = 99 // an account whose record went, its messages not yet
		}
		err := db.writes.update(func(tx *bbolt.Tx) error { return tx.Bucket(tt.bucket).Put(itob(key), tt.value) })
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = exportAll(t, db)
		if !errors.Is(err, ErrNotExportable) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Export of a file marked in %s = %v, want %q and ErrNotExportable", tt.bucket, err, tt.want)
		}
		reopen(t, db)
		if _, _, err := exportAll(t, db); err != nil {
			t.Errorf("Export after Open finished the %s mark = %v", tt.bucket, err)
		}
	}
	if _, _, err := db.Message(ctx, model.ByServer(), m.ID); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("the message the removal was made for: %v, want removed by Open", err)
	}
}
