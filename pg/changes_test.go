package pg_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
	"herald/storetest"
)

// follow reads the log from after through db, waking on ChangeHead, until
// it holds want changes or the time runs out.
func follow(ctx context.Context, db *pg.DB, after uint64, want int) ([]*model.Change, error) {
	var got []*model.Change
	for len(got) < want {
		_, wait, err := db.ChangeHead(ctx)
		if err != nil {
			return got, err
		}
		chs, _, err := db.ChangesAfter(ctx, after, 500)
		if err != nil {
			return got, err
		}
		got = append(got, chs...)
		if len(chs) > 0 {
			after = chs[len(chs)-1].Seq
			continue
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return got, fmt.Errorf("%d of %d changes: %w", len(got), want, ctx.Err())
		}
	}
	return got, nil
}

// TestChangesAcrossInstances: writers on two instances of one database,
// concurrently; readers on each see one log, dense, every change once, in
// one order, whatever instance wrote it.
func TestChangesAcrossInstances(t *testing.T) {
	a, url := open(t, pg.Options{})
	b := openURL(t, url, pg.Options{})
	ctx := context.Background()
	var users []*model.User
	for i := range 4 {
		u := &model.User{Email: fmt.Sprintf("w%d@example.com", i), PasswordHash: storetest.FakePasswordHash}
		if _, err := a.CreateUser(ctx, u, storetest.TokenHash(u.Email), time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
	}
	const each = 60
	total := len(users) * each
	results := make([][]*model.Change, 2)
	errs := make([]error, 2)
	var readers sync.WaitGroup
	readCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i, db := range []*pg.DB{a, b} {
		readers.Go(func() { results[i], errs[i] = follow(readCtx, db, 0, total) })
	}
	var writers sync.WaitGroup
	for i, u := range users {
		db := []*pg.DB{a, b}[i%2]
		writers.Go(func() {
			for j := range each {
				if _, err := db.CreateMessage(ctx, model.ByUser(u.ID), fmt.Sprintf("%d says %d", u.ID, j)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	writers.Wait()
	readers.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
	}
	for i, got := range results {
		if len(got) != total {
			t.Fatalf("reader %d saw %d changes, want %d", i, len(got), total)
		}
		for j, ch := range got {
			if ch.Seq != uint64(j+1) || ch.Message.ID != uint64(j+1) {
				t.Fatalf("reader %d: change %d is %d of message %d; want positions and IDs dense, in commit order", i, j+1, ch.Seq, ch.Message.ID)
			}
		}
	}
	if !slices.EqualFunc(results[0], results[1], func(x, y *model.Change) bool {
		return storetest.ChangeString(x) == storetest.ChangeString(y)
	}) {
		t.Error("the two instances read different logs")
	}
}

// TestLostNotification: an instance whose listening connection is cut
// still learns of every change, from its poll, within a poll's delay.
func TestLostNotification(t *testing.T) {
	a, url := open(t, pg.Options{})
	b := openURL(t, url, pg.Options{PollEvery: 200 * time.Millisecond})
	ctx := context.Background()
	u := &model.User{Email: "ada@example.com", PasswordHash: storetest.FakePasswordHash}
	if _, err := a.CreateUser(ctx, u, storetest.TokenHash("ada"), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		head, wait, err := b.ChangeHead(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Cut every listening connection, then write at once: the
		// notification has nobody to reach.
		if err := pgtest.Exec(ctx, url, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND query ILIKE 'LISTEN%'`); err != nil {
			t.Fatal(err)
		}
		if _, err := a.CreateMessage(ctx, model.ByUser(u.ID), fmt.Sprint("round ", round)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wait:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: instance b never heard of the change", round)
		}
		chs, _, err := b.ChangesAfter(ctx, head, 10)
		if err != nil || len(chs) != 1 || chs[0].Message.Content != fmt.Sprint("round ", round) {
			t.Fatalf("round %d: b reads %v, %v", round, chs, err)
		}
	}
}
