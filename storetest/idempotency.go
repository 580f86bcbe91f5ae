package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"herald/model"
)

// Key is a made-up Idempotency-Key as a store receives it: the hash of
// name, and the fingerprint of a request named request.
func Key(name, request string) model.IdempotencyKey {
	return model.IdempotencyKey{ID: sha256.Sum256([]byte("key:" + name)), Fingerprint: sha256.Sum256([]byte(name + " " + request))}
}

// createWithKey creates content with key for by, failing on error.
func (e *env) createWithKey(by model.Caller, content string, key model.IdempotencyKey) *model.Message {
	e.t.Helper()
	m, err := e.Store.CreateMessageWithKey(e.ctx(), by, content, key)
	if err != nil {
		e.t.Fatalf("CreateMessageWithKey(%q) = %v", content, err)
	}
	return m
}

// records reads the stored idempotency records' raw bytes.
func (e *env) records() [][]byte {
	e.t.Helper()
	if e.IdempotencyRecords == nil {
		e.t.Fatal("the store under test was opened without IdempotencyRecords")
	}
	recs, err := e.IdempotencyRecords(e.ctx())
	if err != nil {
		e.t.Fatal(err)
	}
	return recs
}

// sameAnswer fails unless got is the first answer first was: the same
// message as the create showed it.
func (e *env) sameAnswer(what string, got, first *model.Message) {
	e.t.Helper()
	if !reflect.DeepEqual(*got, *first) {
		e.t.Errorf("%s answered %+v, want the first answer %+v", what, *got, *first)
	}
}

// testIdempotency: a create made with a key is made once; a retry with
// the key and the same request, within the window, from any token of the
// account, gets the first answer and writes nothing, also after the
// message was edited or deleted, and even when many retries come at once;
// the key with another request is refused; another account's key, and a
// key past its window, are new keys. What is stored holds no content, and
// goes with the account and with the sweep.
func testIdempotency(e *env) {
	t := e.t
	ctx := e.ctx()
	ada, adaTok := e.user("ada@example.com")
	bob, bobTok := e.user("bob@example.com")
	phone := e.login(ada, "phone")

	first := e.createWithKey(model.ByToken(adaTok), "hello once", Key("k1", "hello once"))
	head, _, _ := e.Store.ChangeHead(ctx)
	before := e.counts()
	e.sameAnswer("a retry", e.createWithKey(model.ByToken(adaTok), "hello once", Key("k1", "hello once")), first)
	e.sameAnswer("a retry from another token of the account", e.createWithKey(model.ByToken(phone), "hello once", Key("k1", "hello once")), first)
	e.sameAnswer("a retry by account ID", e.createWithKey(model.ByUser(ada.ID), "hello once", Key("k1", "hello once")), first)
	_, err := e.Store.CreateMessageWithKey(ctx, model.ByToken(adaTok), "hello twice", Key("k1", "hello twice"))
	wantKind(t, "the key with another request", err, model.ErrKeyReused, "")
	if got := e.counts(); got != before {
		t.Errorf("counts after retries = %+v, want %+v", got, before)
	}
	if chs := e.changes(head); len(chs) != 0 {
		t.Errorf("retries logged %s", changeStrings(chs))
	}

	// Another account's key is its own.
	bobs := e.createWithKey(model.ByToken(bobTok), "hello once", Key("k1", "hello once"))
	if bobs.ID == first.ID || bobs.OwnerID != bob.ID {
		t.Errorf("bob's create with ada's key = %+v, want a message of his own", bobs)
	}

	// A refused create leaves no record: the key is still new.
	_, err = e.Store.CreateMessageWithKey(ctx, model.ByToken(adaTok), "   ", Key("k2", "blank"))
	wantKind(t, "blank content with a key", err, model.ErrInvalid, "")
	e.createWithKey(model.ByToken(adaTok), "not blank", Key("k2", "not blank"))

	// A token that stopped working gets no answer, first or other.
	if err := e.Store.RevokeToken(ctx, phone); err != nil {
		t.Fatal(err)
	}
	_, err = e.Store.CreateMessageWithKey(ctx, model.ByToken(phone), "hello once", Key("k1", "hello once"))
	wantKind(t, "a retry with a revoked token", err, model.ErrUnauthorized, "")

	// Edited or deleted since, the message is answered as first shown,
	// its content taken from the retry, and nothing is written again.
	edited := e.createWithKey(model.ByToken(adaTok), "words to edit away", Key("k3", "edit"))
	if _, err := e.Store.UpdateMessage(ctx, edited.ID, model.ByToken(adaTok), model.MessageUpdate{Content: ptr("words kept")}, nil); err != nil {
		t.Fatal(err)
	}
	deleted := e.createWithKey(model.ByToken(adaTok), "words to delete", Key("k4", "delete"))
	if _, err := e.Store.DeleteMessage(ctx, deleted.ID, model.ByToken(adaTok), nil); err != nil {
		t.Fatal(err)
	}
	moderated := e.createWithKey(model.ByToken(bobTok), "words moderated away", Key("k5", "moderate"))
	if _, err := e.Store.RemoveMessagesOf(ctx, model.ByServer(), bob.ID); err != nil {
		t.Fatal(err)
	}
	head, _, _ = e.Store.ChangeHead(ctx)
	before = e.counts()
	e.sameAnswer("a retry after an edit", e.createWithKey(model.ByToken(adaTok), "words to edit away", Key("k3", "edit")), edited)
	e.sameAnswer("a retry after a deletion", e.createWithKey(model.ByToken(adaTok), "words to delete", Key("k4", "delete")), deleted)
	e.sameAnswer("a retry after a moderation", e.createWithKey(model.ByToken(bobTok), "words moderated away", Key("k5", "moderate")), moderated)
	if got := e.counts(); got != before {
		t.Errorf("counts after retries of changed messages = %+v, want %+v", got, before)
	}
	if chs := e.changes(head); len(chs) != 0 {
		t.Errorf("retries of changed messages logged %s", changeStrings(chs))
	}
	recs := e.records()
	if len(recs) != 6 {
		t.Errorf("%d idempotency records, want 6 (k1 twice, k2 to k5)", len(recs))
	}
	for _, gone := range []string{"hello once", "words to edit away", "words to delete", "words moderated away"} {
		for _, rec := range recs {
			if bytes.Contains(rec, []byte(gone)) || bytes.Contains(rec, []byte(hex.EncodeToString([]byte(gone)))) {
				t.Errorf("an idempotency record holds %q: %q", gone, rec)
			}
		}
	}

	// Many retries at once: one create, one answer.
	var wg sync.WaitGroup
	answers := make([]*model.Message, 16)
	errs := make([]error, len(answers))
	for i := range answers {
		wg.Go(func() {
			answers[i], errs[i] = e.Store.CreateMessageWithKey(ctx, model.ByToken(adaTok), "said once at once", Key("k6", "at once"))
		})
	}
	wg.Wait()
	for i := range answers {
		if errs[i] != nil {
			t.Fatalf("create %d of 16 at once with one key: %v", i, errs[i])
		}
		e.sameAnswer(fmt.Sprintf("create %d of 16 at once", i), answers[i], answers[0])
	}
	if page := e.search(model.SearchQuery{Terms: []string{"once"}, Limit: 20}); !slices.Equal(pageIDs(page), []uint64{answers[0].ID, first.ID}) {
		t.Errorf("messages with \"once\" = %v, want %v (bob's were removed)", pageIDs(page), []uint64{answers[0].ID, first.ID})
	}

	// A day on, the key is a new key, whether or not the sweep has run.
	e.clock.Add(model.IdempotencyWindow - time.Microsecond)
	e.sameAnswer("a retry just within the window", e.createWithKey(model.ByToken(adaTok), "hello once", Key("k1", "hello once")), first)
	e.clock.Add(time.Microsecond)
	again := e.createWithKey(model.ByToken(adaTok), "hello once", Key("k1", "hello once"))
	if again.ID <= answers[0].ID {
		t.Errorf("the key a day on answered message %d, want a new one", again.ID)
	}
	e.sameAnswer("a retry of the key made anew", e.createWithKey(model.ByToken(adaTok), "hello once", Key("k1", "hello once")), again)
	if _, err := e.Store.CreateMessageWithKey(ctx, model.ByToken(adaTok), "other words", Key("k2", "other words")); err != nil {
		t.Errorf("a key a day on with another request: %v, want a create", err)
	}

	// The sweep takes what is past the window; an account's deletion
	// takes its records.
	// (How many it deletes depends on whether the records the new k1 and
	// k2 replaced were deleted then; what is left does not.)
	if n, err := e.Store.SweepIdempotencyKeys(ctx); err != nil || n == 0 {
		t.Errorf("SweepIdempotencyKeys = %d, %v; want the records of a day ago", n, err)
	}
	if got := len(e.records()); got != 2 {
		t.Errorf("%d records after the sweep, want ada's 2 of today", got)
	}
	if err := e.Store.DeleteAccount(ctx, model.ByToken(adaTok)); err != nil {
		t.Fatal(err)
	}
	if got := e.records(); len(got) != 0 {
		t.Errorf("records after ada's account was deleted: %q", got)
	}
	_, err = e.Store.CreateMessageWithKey(ctx, model.ByToken(adaTok), "hello once", Key("k1", "hello once"))
	if !errors.Is(err, model.ErrUnauthorized) {
		t.Errorf("a retry of a deleted account = %v, want unauthorized", err)
	}
}
