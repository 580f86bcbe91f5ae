package pg_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
	"herald/storetest"
)

// register makes an account with handle and returns it and its token as
// a caller.
func register(t *testing.T, db *pg.DB, handle string) (*model.User, model.Caller) {
	t.Helper()
	u := &model.User{Email: handle + "@example.com", Handle: handle, PasswordHash: storetest.FakePasswordHash}
	tok := storetest.TokenHash("people:" + handle)
	if _, err := db.CreateUser(context.Background(), u, tok, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	return u, model.ByToken(tok)
}

// TestSchemaUpgradePeople: a database at schema version 5, as the landed
// release left it, with its messages and change log, is upgraded to
// replies, mentions and notifications: its messages answer none, mention
// none and count no replies, its old changes read with their owners'
// handles, and a reply to an old message counts, notifies and counts
// down again when deleted.
func TestSchemaUpgradePeople(t *testing.T) {
	cluster.Require(t)
	ctx := context.Background()
	url := cluster.Database(t)
	v5 := `CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now());` +
		pg.Migrations[0] + pg.Migrations[1] + pg.Migrations[2] + pg.Migrations[3] + pg.Migrations[4] + `
INSERT INTO schema_version (version) VALUES (1), (2), (3), (4), (5);
INSERT INTO users (id, email, email_key, email_skeleton, password_hash, roles, created_at) VALUES
	(1, 'ada@example.com', 'ada@example.com', 's1', 'hash', '{ROLE_USER}', '2026-11-20T10:00:00Z'),
	(2, 'bob@example.com', 'bob@example.com', 's2', 'hash', '{ROLE_USER}', '2026-11-20T10:00:00Z');
SELECT setval(pg_get_serial_sequence('users', 'id'), 2);
INSERT INTO messages (id, owner_id, content, terms, created_at, updated_at, revision) VALUES
	(1, 1, 'a question', '{a,question}', '2026-11-20T10:01:00Z', '2026-11-20T10:01:00Z', 1),
	(2, 2, 'hi @ada', '{ada,hi}', '2026-11-20T10:02:00Z', '2026-11-20T10:02:00Z', 1);
INSERT INTO changes (seq, kind, at, user_id, message_id, owner_email, content, created_at, updated_at, revision) VALUES
	(1, 1, '2026-11-20T10:01:00Z', 1, 1, 'ada@example.com', 'a question', '2026-11-20T10:01:00Z', '2026-11-20T10:01:00Z', 1),
	(2, 1, '2026-11-20T10:02:00Z', 2, 2, 'bob@example.com', 'hi @ada', '2026-11-20T10:02:00Z', '2026-11-20T10:02:00Z', 1);
UPDATE change_counter SET seq = 2, message_id = 2, message_created = '2026-11-20T10:02:00Z';`
	if err := pgtest.Exec(ctx, url, v5); err != nil {
		t.Fatal(err)
	}
	db := openURL(t, url, pg.Options{})
	if got, err := pgtest.QueryInt(ctx, url, "SELECT max(version) FROM schema_version"); err != nil || got != int64(pg.SchemaVersion) {
		t.Fatalf("schema version after the upgrade = %d, %v; want %d", got, err, pg.SchemaVersion)
	}
	for id, handle := range map[uint64]string{1: "ada", 2: "bob"} {
		_, m, err := db.Message(ctx, model.ByServer(), id)
		if err != nil || m.ReplyTo != 0 || m.Replies != 0 || m.Mentions != nil || m.OwnerHandle != handle {
			t.Errorf("message %d after the upgrade = %+v, %v; want no replyTo, replies or mentions, owner @%s", id, m, err, handle)
		}
	}
	chs, _, err := db.ChangesAfter(ctx, 0, 10)
	if err != nil || len(chs) != 2 {
		t.Fatalf("ChangesAfter(0) = %v, %v", chs, err)
	}
	if m := chs[1].Message; m.OwnerHandle != "bob" || m.ReplyTo != 0 || m.Mentions != nil || m.Content != "hi @ada" {
		t.Errorf("an old change reads %+v", m)
	}

	bob, err := db.UserByID(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := db.PostMessage(ctx, model.ByUser(bob.ID), model.Draft{Content: "an answer for @ada", ReplyTo: 1}, nil)
	if err != nil || reply.ID != 3 || reply.ReplyTo != 1 || len(reply.Mentions) != 1 || reply.Mentions[0].UserID != 1 {
		t.Fatalf("a reply to an old message = %+v, %v", reply, err)
	}
	if _, m, err := db.Message(ctx, model.ByServer(), 1); err != nil || m.Replies != 1 {
		t.Errorf("the old message answered = %+v, %v; want 1 reply", m, err)
	}
	page, err := db.Notifications(ctx, model.ByUser(1), model.NotificationQuery{})
	if err != nil || len(page.Items) != 1 || page.Unread != 1 || page.Items[0].Kind != model.NotifyMention ||
		page.Items[0].ID != 4 || page.Items[0].Message == nil || page.Items[0].Message.ID != reply.ID {
		t.Errorf("ada's notifications = %+v, %v; want the mention, change 4", page, err)
	}
	if _, err := db.DeleteMessage(ctx, reply.ID, model.ByUser(bob.ID), nil); err != nil {
		t.Fatal(err)
	}
	if _, m, err := db.Message(ctx, model.ByServer(), 1); err != nil || m.Replies != 0 {
		t.Errorf("the old message after its reply's deletion = %+v, %v; want 0 replies", m, err)
	}
}

// TestProfileChangeOnEveryInstance: a name and a handle changed through
// one instance are what the other's pages show next, though it had read
// and kept the old ones; and a reply's page shows them too.
func TestProfileChangeOnEveryInstance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one, url := open(t, pg.Options{})
	two := openURL(t, url, pg.Options{})
	ada, byAda := register(t, one, "ada")
	root, err := one.CreateMessage(ctx, byAda, "a thread")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.PostMessage(ctx, byAda, model.Draft{Content: "its reply", ReplyTo: root.ID}, nil); err != nil {
		t.Fatal(err)
	}
	shown := func(db *pg.DB) []string {
		t.Helper()
		_, p, err := db.SearchMessages(ctx, byAda, model.SearchQuery{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := db.Replies(ctx, byAda, model.RepliesQuery{MessageID: root.ID})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range append(p.Messages, r.Messages...) {
			out = append(out, m.OwnerName+" @"+m.OwnerHandle)
		}
		return out
	}
	for _, db := range []*pg.DB{one, two} {
		if got := shown(db); !slices.Equal(got, []string{"ada @ada", "ada @ada", "ada @ada"}) {
			t.Fatalf("before the change: %q", got)
		}
	}
	if two.OwnersKept() != 1 {
		t.Fatalf("the second instance keeps %d owners, want ada", two.OwnersKept())
	}
	name, handle := "Ada Lovelace", "countess"
	if _, err := one.UpdateProfile(ctx, byAda, model.ProfileUpdate{Name: &name, Handle: &handle}); err != nil {
		t.Fatal(err)
	}
	want := []string{"Ada Lovelace @countess", "Ada Lovelace @countess", "Ada Lovelace @countess"}
	if got := shown(one); !slices.Equal(got, want) {
		t.Errorf("the instance that made the change shows %q, want %q", got, want)
	}
	// The other hears of it as soon as its listener does: the change's
	// notification is sent before the change's answer.
	deadline := time.Now().Add(5 * time.Second)
	for got := shown(two); !slices.Equal(got, want); got = shown(two) {
		if time.Now().After(deadline) {
			t.Fatalf("the other instance shows %q, want %q", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = ada
}

// TestReplyCountsUnderConcurrency: replies posted and deleted on two
// instances at once, to the same messages, and an account whose replies
// go with it, leave every message counting exactly the replies it has.
func TestReplyCountsUnderConcurrency(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	one, url := open(t, pg.Options{})
	two := openURL(t, url, pg.Options{})
	_, byAda := register(t, one, "ada")
	var roots []uint64
	for i := range 3 {
		m, err := one.CreateMessage(ctx, byAda, fmt.Sprintf("root %d", i))
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, m.ID)
	}
	var callers []model.Caller
	for i := range 4 {
		_, by := register(t, one, fmt.Sprintf("writer%d", i))
		callers = append(callers, by)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(callers))
	for i, by := range callers {
		db := []*pg.DB{one, two}[i%2]
		wg.Go(func() {
			for j := range 30 {
				m, err := db.PostMessage(ctx, by, model.Draft{Content: fmt.Sprintf("reply %d @ada", j), ReplyTo: roots[j%len(roots)]}, nil)
				if err != nil {
					errs <- err
					return
				}
				if j%2 == 0 {
					if _, err := db.DeleteMessage(ctx, m.ID, by, nil); err != nil {
						errs <- err
						return
					}
				}
			}
			if i == 0 {
				// The account goes, with its replies, while the others
				// write.
				errs <- db.DeleteAccount(ctx, by)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range roots {
		_, m, err := two.Message(ctx, model.ByServer(), id)
		if err != nil {
			t.Fatal(err)
		}
		listed := 0
		q := model.RepliesQuery{MessageID: id, Limit: 100}
		for {
			p, err := one.Replies(ctx, byAda, q)
			if err != nil {
				t.Fatal(err)
			}
			listed += len(p.Messages)
			if p.NextAfterID == 0 {
				break
			}
			q.AfterID = p.NextAfterID
		}
		// Of the 10 replies to each root by each of the three writers
		// left, every other one deleted: 15.
		if m.Replies != uint64(listed) || listed != 15 {
			t.Errorf("message %d counts %d replies and lists %d; want 15", id, m.Replies, listed)
		}
	}
	if got, err := pgtest.QueryInt(ctx, url, `SELECT count(*) FROM messages p
		WHERE p.replies <> (SELECT count(*) FROM messages r WHERE r.reply_to = p.id)`); err != nil || got != 0 {
		t.Errorf("%d messages count other than their replies (%v)", got, err)
	}
}

// TestPostWithKey: a reply made with an Idempotency-Key is made once,
// whether its retry comes to the same instance or, at the same time, to
// another; the retry answers as the first did, and the message answered
// counts one reply.
func TestPostWithKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	one, url := open(t, pg.Options{})
	two := openURL(t, url, pg.Options{})
	_, byAda := register(t, one, "ada")
	_, byBob := register(t, one, "bob")
	root, err := one.CreateMessage(ctx, byAda, "a question")
	if err != nil {
		t.Fatal(err)
	}
	draft := model.Draft{Content: "an answer, @ada", ReplyTo: root.ID}
	for round := range 3 {
		key := storetest.Key(fmt.Sprintf("reply %d", round), draft.Content)
		var (
			wg   sync.WaitGroup
			msgs [2]*model.Message
			errs [2]error
		)
		for i, db := range []*pg.DB{one, two} {
			wg.Go(func() { msgs[i], errs[i] = db.PostMessage(ctx, byBob, draft, &key) })
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: %v, %v", round, errs[0], errs[1])
		}
		if !reflect.DeepEqual(*msgs[0], *msgs[1]) || msgs[0].ReplyTo != root.ID || len(msgs[0].Mentions) != 1 {
			t.Errorf("round %d: the two instances answered %+v and %+v, want one reply", round, *msgs[0], *msgs[1])
		}
		again, err := one.PostMessage(ctx, byBob, draft, &key)
		if err != nil || !reflect.DeepEqual(*again, *msgs[0]) {
			t.Errorf("round %d: a retry = %+v, %v; want %+v", round, again, err, *msgs[0])
		}
		other := model.Draft{Content: "something else", ReplyTo: root.ID}
		otherKey := storetest.Key(fmt.Sprintf("reply %d", round), other.Content)
		if _, err := two.PostMessage(ctx, byBob, other, &otherKey); !errors.Is(err, model.ErrKeyReused) {
			t.Errorf("round %d: the key with another draft = %v, want ErrKeyReused", round, err)
		}
	}
	if _, m, err := one.Message(ctx, model.ByServer(), root.ID); err != nil || m.Replies != 3 {
		t.Errorf("the message answered = %+v, %v; want 3 replies, one a round", m, err)
	}
	if p, err := one.Notifications(ctx, byAda, model.NotificationQuery{}); err != nil || len(p.Items) != 3 {
		t.Errorf("ada's notifications = %+v, %v; want one a round", p, err)
	}
}

// TestPostBatch: posts written by one group commit are each answered on
// their own. Refused posts (a revoked or unknown token, a reply to a
// message that does not exist) write nothing and keep none of the others
// from being written; the others get consecutive log positions, each
// message's change followed by its notifications' (a notification's ID
// is its position); replies are counted and notifications kept and
// counted as if each post had been written alone.
func TestPostBatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var commits, writes atomic.Int32
	db, _ := open(t, pg.Options{OnCommit: func(_ time.Duration, n int) { commits.Add(1); writes.Add(int32(n)) }})
	ada, byAda := register(t, db, "ada")
	bob, byBob := register(t, db, "bob")
	cy, byCy := register(t, db, "cy")
	if err := db.RevokeToken(ctx, storetest.TokenHash("people:cy")); err != nil {
		t.Fatal(err)
	}
	root, err := db.CreateMessage(ctx, byAda, "a question")
	if err != nil {
		t.Fatal(err)
	}
	head, _, err := db.ChangeHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	by := []model.Caller{byBob, byCy, byBob, model.ByUser(cy.ID), byAda, model.ByToken(storetest.TokenHash("never")), byBob}
	drafts := []model.Draft{
		{Content: "an answer", ReplyTo: root.ID},                // notifies ada (reply)
		{Content: "revoked, @ada", ReplyTo: root.ID},            // refused
		{Content: "to nothing", ReplyTo: root.ID + 1000},        // refused
		{Content: "@ada and @bob, @nobody", ReplyTo: root.ID},   // notifies ada (reply) and bob (mention)
		{Content: "my own @ada, and @cy"},                       // notifies cy only
		{Content: "unknown, @ada"},                              // refused
		{Content: "@ada once more, @ada", ReplyTo: root.ID + 1}, // refused
	}
	commits.Store(0)
	writes.Store(0)
	msgs, errs := db.PostBatch(ctx, by, drafts)
	if c, w := commits.Load(), writes.Load(); c != 1 || w != 3 {
		t.Errorf("the batch took %d commits carrying %d writes, want one carrying its 3 posts", c, w)
	}
	wantErr := []error{nil, model.ErrUnauthorized, model.ErrInvalid, nil, nil, model.ErrUnauthorized, model.ErrInvalid}
	for i := range drafts {
		if !errors.Is(errs[i], wantErr[i]) || (wantErr[i] == nil && errs[i] != nil) {
			t.Errorf("post %d (%q): %v, want %v", i, drafts[i].Content, errs[i], wantErr[i])
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	created := []*model.Message{msgs[0], msgs[3], msgs[4]}
	notified := map[uint64][]uint64{msgs[0].ID: {ada.ID}, msgs[3].ID: {ada.ID, bob.ID}, msgs[4].ID: {cy.ID}}
	chs, now, err := db.ChangesAfter(ctx, head, 100)
	if err != nil || now != head+3+4 || len(chs) != 7 {
		t.Fatalf("changes after the batch: %d, head %d (was %d), %v; want 3 messages and 4 notifications", len(chs), now, head, err)
	}
	seq := head
	var seen []uint64
	for _, ch := range chs {
		seq++
		if ch.Seq != seq {
			t.Fatalf("change %d follows %d", ch.Seq, seq-1)
		}
		if ch.Kind == model.MessageCreated {
			seen = append(seen, ch.Message.ID)
			continue
		}
		last := seen[len(seen)-1]
		if ch.Kind != model.NotificationCreated || ch.Notification.MessageID != last || ch.Notification.ID != ch.Seq ||
			!slices.Contains(notified[last], ch.UserID) {
			t.Errorf("change %d: %s, want a notification of message %d to one of %v", ch.Seq, storetest.ChangeString(ch), last, notified[last])
		}
	}
	for _, m := range created {
		if !slices.Contains(seen, m.ID) {
			t.Errorf("message %d created but not logged", m.ID)
		}
		if _, got, err := db.Message(ctx, model.ByServer(), m.ID); err != nil || got.Content != m.Content || got.ReplyTo != m.ReplyTo {
			t.Errorf("message %d as stored: %+v, %v; created %+v", m.ID, got, err, m)
		}
	}
	if _, m, err := db.Message(ctx, model.ByServer(), root.ID); err != nil || m.Replies != 2 {
		t.Errorf("the message answered = %+v, %v; want 2 replies", m, err)
	}
	for _, who := range []struct {
		by   model.Caller
		want int
	}{{byAda, 2}, {byBob, 1}, {model.ByUser(cy.ID), 1}} {
		if p, err := db.Notifications(ctx, who.by, model.NotificationQuery{}); err != nil || len(p.Items) != who.want || p.Unread != who.want {
			t.Errorf("notifications of %v = %+v, %v; want %d, all unread", who.by, p, err, who.want)
		}
	}
}
