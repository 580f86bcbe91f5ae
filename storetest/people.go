package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"herald/model"
)

// person registers email with handle and returns the account and its
// token as a caller.
func (e *env) person(email, handle string) (*model.User, model.Caller) {
	e.t.Helper()
	u := &model.User{Email: email, Handle: handle, PasswordHash: FakePasswordHash}
	h := TokenHash("register:" + email)
	if _, err := e.Store.CreateUser(e.ctx(), u, h, ttl, nil); err != nil {
		e.t.Fatalf("CreateUser(%q) = %v", email, err)
	}
	return u, model.ByToken(h)
}

// reply posts content as by's answer to replyTo.
func (e *env) reply(by model.Caller, replyTo uint64, content string) *model.Message {
	e.t.Helper()
	m, err := e.Store.PostMessage(e.ctx(), by, model.Draft{Content: content, ReplyTo: replyTo}, nil)
	if err != nil {
		e.t.Fatalf("PostMessage(%q, replyTo %d) = %v", content, replyTo, err)
	}
	return m
}

func (e *env) replies(by model.Caller, id uint64) []uint64 {
	e.t.Helper()
	var ids []uint64
	q := model.RepliesQuery{MessageID: id, Limit: 2}
	for range 1000 {
		p, err := e.Store.Replies(e.ctx(), by, q)
		if err != nil {
			e.t.Fatalf("Replies(%+v) = %v", q, err)
		}
		for _, m := range p.Messages {
			ids = append(ids, m.ID)
		}
		if p.NextAfterID == 0 {
			return ids
		}
		q.AfterID = p.NextAfterID
	}
	e.t.Fatal("Replies never ended")
	return nil
}

func (e *env) message(id uint64) *model.Message {
	e.t.Helper()
	_, m, err := e.Store.Message(e.ctx(), model.ByServer(), id)
	if err != nil {
		e.t.Fatalf("Message(%d) = %v", id, err)
	}
	return m
}

func (e *env) notifications(by model.Caller, q model.NotificationQuery) *model.NotificationPage {
	e.t.Helper()
	p, err := e.Store.Notifications(e.ctx(), by, q)
	if err != nil {
		e.t.Fatalf("Notifications(%+v) = %v", q, err)
	}
	return p
}

// notificationsSeen lists by's notifications as "kind actor message
// read", newest first, every page of them.
func (e *env) notificationsSeen(by model.Caller) (seen []string, unread int) {
	e.t.Helper()
	q := model.NotificationQuery{Limit: 3}
	for range 1000 {
		p := e.notifications(by, q)
		for _, n := range p.Items {
			msg := "gone"
			if n.Message != nil {
				msg = n.Message.Content
			}
			seen = append(seen, fmt.Sprintf("%s @%s %s read=%v", n.Kind, n.Actor.Handle, msg, n.Read))
		}
		unread = p.Unread
		if p.NextBeforeID == 0 {
			return seen, unread
		}
		q.BeforeID = p.NextBeforeID
	}
	e.t.Fatal("Notifications never ended")
	return nil, 0
}

// testThreads: a reply names the message it answers, which counts its
// replies; the replies are listed oldest first, a page at a time, with a
// deleted message's still listed and a deleted reply no longer; a reply
// to a message that does not exist is a violation of replyTo; an edit
// keeps replyTo; the owners' names and handles come with every message.
func testThreads(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, byAda := e.person("ada@example.com", "ada")
	bob, byBob := e.person("bob@example.com", "bob")
	root := e.post(ada.ID, "a question")
	if root.ReplyTo != 0 || root.Replies != 0 || root.OwnerHandle != "ada" || root.OwnerName != "ada" {
		t.Errorf("a new message = %+v, want no replyTo, no replies, the owner's handle and name", root)
	}
	r1 := e.reply(byBob, root.ID, "an answer")
	r2 := e.reply(byAda, root.ID, "thanks")
	r3 := e.reply(byBob, r1.ID, "an answer to the answer")
	if r1.ReplyTo != root.ID || r1.OwnerHandle != "bob" || r3.ReplyTo != r1.ID {
		t.Errorf("replies = %+v, %+v", r1, r3)
	}
	if got := e.message(root.ID).Replies; got != 2 {
		t.Errorf("root has %d replies, want 2", got)
	}
	if got := e.message(r1.ID); got.Replies != 1 || got.ReplyTo != root.ID {
		t.Errorf("the first reply read back = %+v, want replyTo %d and 1 reply", got, root.ID)
	}
	if got, want := e.replies(byBob, root.ID), []uint64{r1.ID, r2.ID}; !sameIDs(got, want) {
		t.Errorf("replies of root = %v, want %v", got, want)
	}

	before := e.counts()
	for _, id := range []uint64{0, r3.ID + 1000} {
		_, err := e.Store.PostMessage(ctx, byBob, model.Draft{Content: "to nothing", ReplyTo: id}, nil)
		var refusal *model.Error
		if !errors.Is(err, model.ErrInvalid) && id != 0 || errors.As(err, &refusal) && refusal.Field != "replyTo" {
			t.Errorf("a reply to message %d = %v, want a refusal naming replyTo", id, err)
		}
	}
	if after := e.counts(); after.Messages != before.Messages+1 { // replyTo 0 is no reply
		t.Errorf("messages %d, then %d; want one more (the message with replyTo 0)", before.Messages, after.Messages)
	}

	text := "an answer, edited"
	if m, err := e.Store.UpdateMessage(ctx, r1.ID, byBob, model.MessageUpdate{Content: &text}, nil); err != nil || m.ReplyTo != root.ID || m.Replies != 1 {
		t.Errorf("UpdateMessage(reply) = %+v, %v; want replyTo %d and its 1 reply", m, err, root.ID)
	}

	if _, err := e.Store.DeleteMessage(ctx, r2.ID, byAda, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.message(root.ID).Replies; got != 1 {
		t.Errorf("root has %d replies after one was deleted, want 1", got)
	}
	if _, err := e.Store.DeleteMessage(ctx, root.ID, byAda, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := e.replies(byAda, root.ID), []uint64{r1.ID}; !sameIDs(got, want) {
		t.Errorf("replies of the deleted root = %v, want %v", got, want)
	}
	if got := e.message(r1.ID).ReplyTo; got != root.ID {
		t.Errorf("a reply to a deleted message has replyTo %d, want %d", got, root.ID)
	}
	if _, err := e.Store.Replies(ctx, byAda, model.RepliesQuery{MessageID: r3.ID + 1000}); !errors.Is(err, model.ErrNotFound) {
		t.Errorf("Replies of a message that never existed = %v, want ErrNotFound", err)
	}
	if _, err := e.Store.Replies(ctx, model.ByToken(TokenHash("nobody")), model.RepliesQuery{MessageID: r1.ID}); !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("Replies with an unknown token = %v, want ErrUnauthorized", err)
	}

	// Names are the owner's now, wherever a message is read.
	name := "Bob Builder"
	if _, err := e.Store.UpdateProfile(ctx, byBob, model.ProfileUpdate{Name: &name}); err != nil {
		t.Fatal(err)
	}
	_, p, err := e.Store.SearchMessages(ctx, byAda, model.SearchQuery{OwnerEmail: bob.Email})
	if err != nil || len(p.Messages) == 0 {
		t.Fatalf("search = %+v, %v", p, err)
	}
	for _, m := range append(p.Messages, e.message(r1.ID)) {
		if m.OwnerName != name || m.OwnerHandle != "bob" {
			t.Errorf("message %d shows its owner as %q @%s, want %q @bob", m.ID, m.OwnerName, m.OwnerHandle, name)
		}
	}
}

// testRepliesWhileWriting: replies posted and deleted concurrently while
// a reader pages through them; every page is in ID order, no reply
// present throughout is skipped or shown twice, and the count is exact
// at the end.
func testRepliesWhileWriting(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, byAda := e.person("ada@example.com", "ada")
	_, byBob := e.person("bob@example.com", "bob")
	root := e.post(ada.ID, "a thread")
	var kept []uint64
	for i := range 10 {
		kept = append(kept, e.reply(byAda, root.ID, fmt.Sprintf("kept %d", i)).ID)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var churned, deleted int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			m, err := e.Store.PostMessage(ctx, byBob, model.Draft{Content: fmt.Sprintf("churn %d", i), ReplyTo: root.ID}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			churned++
			if i%2 == 0 {
				if _, err := e.Store.DeleteMessage(ctx, m.ID, byBob, nil); err != nil {
					t.Error(err)
					return
				}
				deleted++
			}
		}
	}()
	for range 20 {
		got := e.replies(byAda, root.ID)
		if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("replies out of order or repeated: %v", got)
		}
		for _, id := range kept {
			if !slices.Contains(got, id) {
				t.Fatalf("reply %d, present throughout, was skipped: %v", id, got)
			}
		}
	}
	close(stop)
	wg.Wait()
	if got, want := e.message(root.ID).Replies, uint64(len(kept)+churned-deleted); got != want {
		t.Errorf("root counts %d replies, want %d", got, want)
	}
	if got := e.replies(byAda, root.ID); len(got) != len(kept)+churned-deleted {
		t.Errorf("root lists %d replies, want %d", len(got), len(kept)+churned-deleted)
	}
}

// testMentions: @handles resolve when a message is written, in order of
// first appearance, at most model.MaxMentions, only accounts that exist,
// only whole handles; an edit resolves them again.
func testMentions(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, _ := e.person("ada@example.com", "ada")
	bob, byBob := e.person("bob@example.com", "bob")
	_, _ = e.person("bobby@example.com", "bobby")
	m := e.post(ada.ID, "hi @Bob and @bobby, @nobody, bob@carl, @bob again, @ada")
	want := []string{"bob", "bobby", "ada"}
	if got := mentionHandles(m); !slices.Equal(got, want) {
		t.Errorf("mentions = %v, want %v", got, want)
	}
	if got := mentionHandles(e.message(m.ID)); !slices.Equal(got, want) {
		t.Errorf("mentions read back = %v, want %v", got, want)
	}
	if m.Mentions[0].UserID != bob.ID {
		t.Errorf("@bob resolved to account %d, want %d", m.Mentions[0].UserID, bob.ID)
	}
	text := "only @bobby now"
	up, err := e.Store.UpdateMessage(ctx, m.ID, model.ByUser(ada.ID), model.MessageUpdate{Content: &text}, nil)
	if err != nil || !slices.Equal(mentionHandles(up), []string{"bobby"}) {
		t.Errorf("edit = %+v, %v; want mentions [bobby]", up, err)
	}
	content := ""
	for i := range model.MaxMentions + 3 {
		e.person(fmt.Sprintf("p%d@example.com", i), fmt.Sprintf("p%d", i))
		content += fmt.Sprintf("@p%d ", i)
	}
	crowd, err := e.Store.PostMessage(ctx, byBob, model.Draft{Content: content}, nil)
	if err != nil || len(crowd.Mentions) != model.MaxMentions || crowd.Mentions[0].Handle != "p0" {
		t.Errorf("a message naming %d accounts mentions %d, want the first %d", model.MaxMentions+3, len(crowd.Mentions), model.MaxMentions)
	}
}

func mentionHandles(m *model.Message) []string {
	var hs []string
	for _, x := range m.Mentions {
		hs = append(hs, x.Handle)
	}
	return hs
}

// testNotifications: a mention and a reply notify once per message and
// person, mention winning; never one's own; an edit notifies only whom it
// newly mentions; listed newest first with exact unread counts, marked
// read up to an ID or all; a deleted message's notification stays without
// it; a suspended actor's are hidden until the suspension is lifted; each
// is a change in the log, for its recipient.
func testNotifications(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, byAda := e.person("ada@example.com", "ada")
	bob, byBob := e.person("bob@example.com", "bob")
	carol, byCarol := e.person("carol@example.com", "carol")
	root := e.post(ada.ID, "my own @ada post, hi @bob")
	headBefore, _, err := e.Store.ChangeHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.reply(byBob, root.ID, "replying and naming @ada")      // ada: mention (wins over reply)
	e.reply(byCarol, root.ID, "a plain reply")               // ada: reply
	talk := e.reply(byCarol, root.ID, "hey @bob and @carol") // bob: mention; ada: reply

	seen, unread := e.notificationsSeen(byAda)
	want := []string{
		"reply @carol hey @bob and @carol read=false",
		"reply @carol a plain reply read=false",
		"mention @bob replying and naming @ada read=false",
	}
	if !slices.Equal(seen, want) || unread != 3 {
		t.Errorf("ada's notifications = %q, %d unread; want %q, 3 unread", seen, unread, want)
	}
	seen, unread = e.notificationsSeen(byBob)
	want = []string{"mention @carol hey @bob and @carol read=false", "mention @ada my own @ada post, hi @bob read=false"}
	if !slices.Equal(seen, want) || unread != 2 {
		t.Errorf("bob's = %q, %d unread; want %q", seen, unread, want)
	}
	if seen, _ := e.notificationsSeen(byCarol); len(seen) != 0 {
		t.Errorf("carol, who mentioned herself, has %q", seen)
	}

	// Each is a change in the log, whose position is its ID.
	chs, _, err := e.Store.ChangesAfter(ctx, headBefore, 100)
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	for _, ch := range chs {
		if ch.Kind == model.NotificationCreated {
			if ch.Notification == nil || ch.Notification.ID != ch.Seq || ch.Notification.UserID != ch.UserID {
				t.Errorf("change %d = %+v, notification %+v", ch.Seq, ch, ch.Notification)
				continue
			}
			logged = append(logged, fmt.Sprintf("%d:%s@%s", ch.UserID, ch.Notification.Kind, ch.Notification.Actor.Handle))
		}
	}
	wantLogged := []string{
		fmt.Sprintf("%d:mention@bob", ada.ID), fmt.Sprintf("%d:reply@carol", ada.ID),
		fmt.Sprintf("%d:mention@carol", bob.ID), fmt.Sprintf("%d:reply@carol", ada.ID),
	}
	if !slices.Equal(logged, wantLogged) {
		t.Errorf("the log's notifications = %v, want %v", logged, wantLogged)
	}

	// An edit notifies the newly mentioned only, once.
	text := "hey @bob and @carol and @ada"
	if _, err := e.Store.UpdateMessage(ctx, talk.ID, byCarol, model.MessageUpdate{Content: &text}, nil); err != nil {
		t.Fatal(err)
	}
	text = "hey @bob, @ada, @carol, @nobody"
	if _, err := e.Store.UpdateMessage(ctx, talk.ID, byCarol, model.MessageUpdate{Content: &text}, nil); err != nil {
		t.Fatal(err)
	}
	if _, unread := e.notificationsSeen(byAda); unread != 3 {
		t.Errorf("ada has %d unread after edits that mention her in a reply to her, want 3 still", unread)
	}
	dan, _ := e.person("dan@example.com", "dan")
	text = "hey @bob, @ada, @carol, @dan"
	if _, err := e.Store.UpdateMessage(ctx, talk.ID, byCarol, model.MessageUpdate{Content: &text}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.UpdateMessage(ctx, talk.ID, byCarol, model.MessageUpdate{Content: &text}, nil); err != nil {
		t.Fatal(err)
	}
	if seen, unread := e.notificationsSeen(model.ByUser(dan.ID)); len(seen) != 1 || unread != 1 {
		t.Errorf("dan, newly mentioned by an edit, has %q (%d unread), want one mention", seen, unread)
	}

	// Read marks, paging, unread only.
	page := e.notifications(byAda, model.NotificationQuery{Limit: 2})
	if len(page.Items) != 2 || page.NextBeforeID == 0 || page.Unread != 3 {
		t.Fatalf("ada's first page = %+v", page)
	}
	if err := e.Store.MarkNotificationsRead(ctx, byAda, page.Items[1].ID); err != nil {
		t.Fatal(err)
	}
	seen, unread = e.notificationsSeen(byAda)
	want = []string{
		"reply @carol hey @bob, @ada, @carol, @dan read=false",
		"reply @carol a plain reply read=true",
		"mention @bob replying and naming @ada read=true",
	}
	if !slices.Equal(seen, want) || unread != 1 {
		t.Errorf("after marking up to the second: %q, %d unread; want %q, 1", seen, unread, want)
	}
	if p := e.notifications(byAda, model.NotificationQuery{Unread: true}); len(p.Items) != 1 || p.Items[0].ID != page.Items[0].ID || p.Unread != 1 {
		t.Errorf("unread only = %+v", p)
	}
	if err := e.Store.MarkNotificationsRead(ctx, byAda, 1); err != nil { // older than the mark: no change
		t.Fatal(err)
	}
	if _, unread := e.notificationsSeen(byAda); unread != 1 {
		t.Errorf("marking up to an older ID changed the count to %d", unread)
	}

	// A suspended actor's notifications are hidden, and back when lifted.
	root2 := e.post(ada.ID, "another")
	e.reply(byBob, root2.ID, "bob answers")
	if _, unread := e.notificationsSeen(byAda); unread != 2 {
		t.Fatalf("ada has %d unread, want 2", unread)
	}
	admin, _ := e.admin("root@example.com")
	suspend := func(on bool) {
		if _, err := e.Store.UpdateAccount(ctx, model.ByUser(admin.ID), bob.ID, model.AccountUpdate{Suspended: &on}); err != nil {
			t.Fatal(err)
		}
	}
	suspend(true)
	seen, unread = e.notificationsSeen(byAda)
	if unread != 1 || len(seen) != 2 {
		t.Errorf("with bob suspended ada sees %q, %d unread; want carol's two, the newest unread", seen, unread)
	}
	// Nor are they delivered: a stream resuming reads them as gone.
	chs, _, err = e.Store.ChangesAfter(ctx, headBefore, 200)
	if err != nil {
		t.Fatal(err)
	}
	for _, ch := range chs {
		if ch.Kind == model.NotificationCreated && ch.Notification != nil && ch.Notification.Actor.ID == bob.ID && !ch.Gone {
			t.Errorf("with bob suspended, the log delivers his notification %d to account %d", ch.Seq, ch.UserID)
		}
	}
	suspend(false)
	if seen, unread := e.notificationsSeen(byAda); unread != 2 || len(seen) != 4 {
		t.Errorf("with bob's suspension lifted ada sees %q, %d unread; want 4, 2 unread", seen, unread)
	}

	// A deleted message's notification stays, without the message.
	if _, err := e.Store.DeleteMessage(ctx, talk.ID, byCarol, nil); err != nil {
		t.Fatal(err)
	}
	if seen, _ := e.notificationsSeen(model.ByUser(dan.ID)); !slices.Equal(seen, []string{"mention @carol gone read=false"}) {
		t.Errorf("dan's after the message's deletion = %q", seen)
	}

	// All read.
	if err := e.Store.MarkNotificationsRead(ctx, byAda, 0); err != nil {
		t.Fatal(err)
	}
	if _, unread := e.notificationsSeen(byAda); unread != 0 {
		t.Errorf("after marking all read, %d unread", unread)
	}

	// They go with the account; its other notifications stay consistent.
	if err := e.Store.DeleteAccount(ctx, model.ByUser(dan.ID)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.Notifications(ctx, model.ByUser(dan.ID), model.NotificationQuery{}); err == nil {
		t.Error("a deleted account's notifications were listed")
	}
	if err := e.Store.DeleteAccount(ctx, byCarol); err != nil {
		t.Fatal(err)
	}
	if seen, _ := e.notificationsSeen(byAda); len(seen) != 2 {
		t.Errorf("after carol's account went, ada sees %q; want only bob's two", seen)
	}
	_ = carol
}

// testNotificationCap: an account keeps its newest model.MaxNotifications,
// the oldest dropped in the transaction that adds one more; and
// TrimNotifications removes those older than it is asked to keep.
func testNotificationCap(e *env) {
	t := e.t
	ctx := e.ctx()
	_, byAda := e.person("ada@example.com", "ada")
	_, byBob := e.person("bob@example.com", "bob")
	for i := range model.MaxNotifications + 2 {
		content := fmt.Sprintf("@ada number %d", i)
		if _, err := e.Store.PostMessage(ctx, byBob, model.Draft{Content: content}, nil); err != nil {
			t.Fatal(err)
		}
	}
	total, oldest := 0, ""
	q := model.NotificationQuery{Limit: model.MaxNotificationsLimit}
	for {
		p := e.notifications(byAda, q)
		total += len(p.Items)
		if len(p.Items) > 0 {
			oldest = p.Items[len(p.Items)-1].Message.Content
		}
		if p.NextBeforeID == 0 {
			if p.Unread != model.MaxNotifications {
				t.Errorf("unread = %d, want %d", p.Unread, model.MaxNotifications)
			}
			break
		}
		q.BeforeID = p.NextBeforeID
	}
	if total != model.MaxNotifications || oldest != "@ada number 2" {
		t.Errorf("ada keeps %d notifications, the oldest about %q; want %d, the oldest about number 2", total, oldest, model.MaxNotifications)
	}
	e.clock.Add(48 * time.Hour)
	n, err := e.Store.TrimNotifications(ctx, 24*time.Hour)
	if err != nil || n != model.MaxNotifications {
		t.Errorf("TrimNotifications(24h) = %d, %v; want all %d (written over 48 hours ago)", n, err, model.MaxNotifications)
	}
	if p := e.notifications(byAda, model.NotificationQuery{}); len(p.Items) != 0 || p.Unread != 0 {
		t.Errorf("after the trim: %+v", p)
	}
	// Once trimmed, a new one is counted from zero again.
	again, err := e.Store.PostMessage(ctx, byBob, model.Draft{Content: "@ada again"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := e.notifications(byAda, model.NotificationQuery{}); len(p.Items) != 1 || p.Unread != 1 {
		t.Errorf("after the trim and one more: %+v", p)
	}
	// An edit of a message whose notification was trimmed mentions anew:
	// what ada keeps says nothing of it, so she is told again; of one she
	// keeps, she is not.
	_, p, err := e.Store.SearchMessages(ctx, byAda, model.SearchQuery{Terms: model.Terms("number 5")})
	if err != nil || len(p.Messages) != 1 {
		t.Fatalf("search = %+v, %v", p, err)
	}
	for _, id := range []uint64{p.Messages[0].ID, again.ID} {
		text := "@ada edited " + fmt.Sprint(id)
		if _, err := e.Store.UpdateMessage(ctx, id, byBob, model.MessageUpdate{Content: &text}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if p := e.notifications(byAda, model.NotificationQuery{}); len(p.Items) != 2 || p.Unread != 2 {
		t.Errorf("after edits of a trimmed one and a kept one: %d notifications, %d unread; want 2, 2", len(p.Items), p.Unread)
	}
}

// testMentionsAfterRename: a mention names an account, not a handle. When
// bob gives up his handle and eve takes it, what was written to @bob stays
// bob's, even when edited, and eve is never notified of it; what is
// written to @bob afterwards is eve's.
func testMentionsAfterRename(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, byAda := e.person("ada@example.com", "ada")
	bob, byBob := e.person("bob@example.com", "bob")
	m := e.post(ada.ID, "hi @bob")
	robert := "robert"
	if _, err := e.Store.UpdateProfile(ctx, byBob, model.ProfileUpdate{Handle: &robert}); err != nil {
		t.Fatal(err)
	}
	eve, byEve := e.person("eve@example.com", "bob")
	text := "hi @bob, edited"
	up, err := e.Store.UpdateMessage(ctx, m.ID, byAda, model.MessageUpdate{Content: &text}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(up.Mentions) != 1 || up.Mentions[0].UserID != bob.ID {
		t.Errorf("the edited message mentions %+v, want bob's account %d still", up.Mentions, bob.ID)
	}
	if p := e.notifications(byEve, model.NotificationQuery{}); len(p.Items) != 0 {
		t.Errorf("eve, who took bob's old handle, was notified of what was written to him: %+v", p.Items[0])
	}
	later := e.post(ada.ID, "hello @bob")
	if len(later.Mentions) != 1 || later.Mentions[0].UserID != eve.ID {
		t.Errorf("a message written after the rename mentions %+v, want eve %d", later.Mentions, eve.ID)
	}
	if p := e.notifications(byBob, model.NotificationQuery{}); p.Unread != 1 {
		t.Errorf("bob has %d unread, want 1 (the message written to him)", p.Unread)
	}
	if p := e.notifications(byEve, model.NotificationQuery{}); p.Unread != 1 {
		t.Errorf("eve has %d unread, want 1 (the message written after she took the handle)", p.Unread)
	}
}

// testNotificationsWhileWriting: four people mention ada and answer her at
// once, some deleting what they wrote, while she reads her notifications
// and marks them read; at the end she has exactly one per message that
// named or answered her, none twice, newest first, and the unread count
// is exactly those after her last mark.
func testNotificationsWhileWriting(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, byAda := e.person("ada@example.com", "ada")
	root := e.post(ada.ID, "ask me anything")
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for w := range writers {
		_, by := e.person(fmt.Sprintf("w%d@example.com", w), fmt.Sprintf("w%d", w))
		wg.Go(func() {
			for i := range each {
				d := model.Draft{Content: fmt.Sprintf("@ada number %d of w%d", i, w)}
				if i%2 == 1 {
					d = model.Draft{Content: fmt.Sprintf("answer %d of w%d", i, w), ReplyTo: root.ID}
				}
				m, err := e.Store.PostMessage(ctx, by, d, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if i%5 == 0 {
					if _, err := e.Store.DeleteMessage(ctx, m.ID, by, nil); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			p, err := e.Store.Notifications(ctx, byAda, model.NotificationQuery{Limit: 5})
			if err != nil {
				t.Error(err)
				return
			}
			if len(p.Items) > 0 {
				if err := e.Store.MarkNotificationsRead(ctx, byAda, p.Items[len(p.Items)-1].ID); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	wg.Wait()
	var ids []uint64
	unread := 0
	q := model.NotificationQuery{Limit: 7}
	for {
		p := e.notifications(byAda, q)
		for _, n := range p.Items {
			ids = append(ids, n.ID)
			if !n.Read {
				unread++
			}
		}
		if p.Unread != unread && p.NextBeforeID == 0 {
			t.Errorf("unread = %d, but %d are listed unread", p.Unread, unread)
		}
		if p.NextBeforeID == 0 {
			break
		}
		q.BeforeID = p.NextBeforeID
	}
	if len(ids) != writers*each || !slices.IsSortedFunc(ids, func(a, b uint64) int { return int(b) - int(a) }) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Errorf("ada has %d notifications (%v), want %d, newest first, none twice", len(ids), ids, writers*each)
	}
	if err := e.Store.MarkNotificationsRead(ctx, byAda, 0); err != nil {
		t.Fatal(err)
	}
	if p := e.notifications(byAda, model.NotificationQuery{}); p.Unread != 0 {
		t.Errorf("after marking all, %d unread", p.Unread)
	}
}
