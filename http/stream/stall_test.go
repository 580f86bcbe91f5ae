package stream

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"herald/bolt"
	"herald/model"
)

// stallingFeed is a bbolt store's change log that, once stalled, answers
// no read until its caller gives up: a database out of reach whose
// connection is not yet found dead.
type stallingFeed struct {
	*bolt.DB
	stalled atomic.Bool
}

func (f *stallingFeed) ChangeHead(ctx context.Context) (uint64, <-chan struct{}, error) {
	if f.stalled.Load() {
		<-ctx.Done()
		return 0, nil, ctx.Err()
	}
	return f.DB.ChangeHead(ctx)
}

func (f *stallingFeed) ChangesAfter(ctx context.Context, after uint64, max int) ([]*model.Change, uint64, error) {
	if f.stalled.Load() {
		<-ctx.Done()
		return nil, 0, ctx.Err()
	}
	return f.DB.ChangesAfter(ctx, after, max)
}

func (f *stallingFeed) RecentChangesAfter(ctx context.Context, after uint64, max int) ([]*model.Change, uint64, error) {
	if f.stalled.Load() {
		<-ctx.Done()
		return nil, 0, ctx.Err()
	}
	return f.DB.RecentChangesAfter(ctx, after, max)
}

// A store that stops answering does not silence the streams: the
// dispatcher gives each read up after Limits.StoreTimeout, and the
// heartbeats go on.
func TestStreamHeartbeatsWhileTheStoreStalls(t *testing.T) {
	db := openTestDB(t)
	feed := &stallingFeed{DB: db}
	hub := startTestHub(t, feed, db, Limits{Heartbeat: 50 * time.Millisecond, StoreTimeout: 100 * time.Millisecond}, nil)
	ada, token := testUser(t, db, "ada@example.com")
	srv := httptest.NewServer(testHandler(db, hub))
	t.Cleanup(srv.Close)
	lines := openStream(t, srv.URL, token, 10*time.Second)
	for lines.Scan() && lines.Text() != ": keep-alive" {
	}
	feed.stalled.Store(true)
	// A commit wakes the dispatcher, whose next read stalls.
	if _, err := db.CreateMessage(context.Background(), model.ByUser(ada.ID), "while the store stalls"); err != nil {
		t.Fatal(err)
	}
	beats := 0
	for beats < 5 && lines.Scan() {
		if lines.Text() == ": keep-alive" {
			beats++
		}
	}
	if beats < 5 {
		t.Fatalf("%d heartbeats while the store stalled, want 5 (%v)", beats, lines.Err())
	}
}
