package pg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"herald/model"
	"herald/pg"
	"herald/storetest"
)

// TestReadsTogether: reads sent in one batch each get their own answer,
// whatever the others' outcome: a read that stops early (a token that
// does not work, so the message is never read) does not hand its unread
// result to the next, a message not found is that read's alone, and a
// statement that fails mid-batch fails only its own read; the others
// after it, failed with it in the pipeline, are answered again alone.
func TestReadsTogether(t *testing.T) {
	for _, batch := range []string{"mixed", "mixed, one failing", "stopping early, then the server"} {
		failing := batch == "mixed, one failing"
		t.Run(batch, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			db, _ := open(t, pg.Options{})

			type account struct {
				user  *model.User
				token model.TokenHash
				ids   []uint64
			}
			accounts := make([]*account, 3)
			for i := range accounts {
				a := &account{
					user:  &model.User{Email: fmt.Sprintf("reader%d@example.com", i), PasswordHash: storetest.FakePasswordHash},
					token: storetest.TokenHash(fmt.Sprint("reader ", i)),
				}
				if _, err := db.CreateUser(ctx, a.user, a.token, time.Hour, nil); err != nil {
					t.Fatal(err)
				}
				for j := range 3 {
					m, err := db.CreateMessage(ctx, model.ByToken(a.token), fmt.Sprintf("message %d of reader %d", j, i))
					if err != nil {
						t.Fatal(err)
					}
					a.ids = append(a.ids, m.ID)
				}
				accounts[i] = a
			}
			unknown := storetest.TokenHash("nobody's")

			// Each read knows its answer; they are queued in this order.
			type read struct {
				name  string
				run   func() error
				check func(err error) error
			}
			var reads []read
			for round := range 3 {
				for i, a := range accounts {
					id := a.ids[round]
					reader := accounts[(i+1)%len(accounts)]
					reads = append(reads, read{
						name: fmt.Sprintf("message %d by reader %d", id, (i+1)%len(accounts)),
						run: func() error {
							u, m, err := db.Message(ctx, model.ByToken(reader.token), id)
							if err != nil {
								return err
							}
							if u.ID != reader.user.ID || m.ID != id || m.OwnerID != a.user.ID ||
								m.Content != fmt.Sprintf("message %d of reader %d", round, i) {
								return fmt.Errorf("got caller %d and message %d of %d %q", u.ID, m.ID, m.OwnerID, m.Content)
							}
							return nil
						},
					})
				}
				reads = append(reads,
					read{
						name: "a token that does not work",
						run: func() error {
							_, _, err := db.Message(ctx, model.ByToken(unknown), accounts[0].ids[0])
							return err
						},
						check: wantKind(model.ErrUnauthorized),
					},
					read{
						name: "a message that does not exist",
						run: func() error {
							_, _, err := db.Message(ctx, model.ByToken(accounts[1].token), 1<<40)
							return err
						},
						check: wantKind(model.ErrNotFound),
					},
					read{
						name: "an owner's newest page",
						run: func() error {
							owner := accounts[2]
							u, page, err := db.SearchMessages(ctx, model.ByToken(accounts[0].token), model.SearchQuery{OwnerEmail: owner.user.Email, Limit: 2})
							if err != nil {
								return err
							}
							if u.ID != accounts[0].user.ID || len(page.Messages) != 2 || page.Messages[0].ID != owner.ids[2] ||
								page.Messages[1].ID != owner.ids[1] || page.NextBeforeID != owner.ids[1] {
								return fmt.Errorf("got caller %d and page %+v", u.ID, page)
							}
							return nil
						},
					},
				)
				if failing && round == 1 {
					reads = append(reads, read{
						name: "a statement that fails",
						run:  db.FailingRead,
						check: func(err error) error {
							if err == nil {
								return errors.New("it did not fail")
							}
							return nil
						},
					})
				}
			}

			// A read by the server, whose statements are the message's
			// alone, right after a read that stops early: given the unread
			// result it would answer with the wrong message, and nothing in
			// the batch would fail to tell.
			if batch == "stopping early, then the server" {
				reads = reads[:4] // three good reads, then one without a working token
			}
			byServer := accounts[2].ids[1]
			reads = append(reads, read{
				name: "a message read by the server",
				run: func() error {
					_, m, err := db.Message(ctx, model.ByServer(), byServer)
					if err != nil {
						return err
					}
					if m.ID != byServer {
						return fmt.Errorf("got message %d", m.ID)
					}
					return nil
				},
			})

			runs := make([]func() error, len(reads))
			for i, r := range reads {
				runs[i] = r.run
			}
			errs := sendHeld(db, runs)
			for i, r := range reads {
				err := errs[i]
				if r.check != nil {
					err = r.check(err)
				}
				if err != nil {
					t.Errorf("%s (read %d of %d in one batch): %v", r.name, i+1, len(reads), err)
				}
			}
		})
	}
}

// TestReadLeftEarly: a read whose client leaves while it waits for its
// batch returns at once with the context's error; the batch still runs
// the others.
func TestReadLeftEarly(t *testing.T) {
	ctx, db, token, id := openPosted(t, pg.Options{}, "leaver")

	queued, release := db.HoldReads()
	leaving, leave := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() { left <- readMessage(leaving, db, token, id) }()
	stayed := make(chan error, 1)
	go func() { stayed <- readMessage(ctx, db, token, id) }()
	for queued() < 2 {
		time.Sleep(time.Millisecond)
	}
	leave()
	select {
	case err := <-left:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the read whose client left: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the read whose client left still waits for its batch")
	}
	release()
	if err := <-stayed; err != nil {
		t.Errorf("the read sent with it: %v", err)
	}
	// A read dropped from its batch says why: its caller, woken by the
	// batch and by its context's end at once, may hear of either first.
	if err := db.SendGone(leaving); !errors.Is(err, context.Canceled) {
		t.Errorf("a read dropped from its batch for a client gone: %v, want context.Canceled", err)
	}
}

// TestReadPanics: a read that panics, which runs on its batch's goroutine,
// fails alone; the process and the reads sent with it go on.
func TestReadPanics(t *testing.T) {
	ctx, db, token, id := openPosted(t, pg.Options{}, "steady")
	read := func() error { return readMessage(ctx, db, token, id) }
	errs := sendHeld(db, []func() error{read, db.PanickingRead, read})
	if errs[1] == nil {
		t.Error("the read that panicked returned no error")
	}
	for _, i := range []int{0, 2} {
		if errs[i] != nil {
			t.Errorf("read %d, sent with the one that panicked: %v", i, errs[i])
		}
	}
}

// wantKind is a read's check that its error is of kind.
func wantKind(kind error) func(error) error {
	return func(err error) error {
		if !errors.Is(err, kind) {
			return fmt.Errorf("got %v, want %v", err, kind)
		}
		return nil
	}
}

// openPosted opens a store with opts on a database of its own, with an
// account named name and one message of its, and returns a context that
// ends in 30 s, the account's token and the message's ID.
func openPosted(t *testing.T, opts pg.Options, name string) (context.Context, *pg.DB, model.TokenHash, uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	db, _ := open(t, opts)
	u := &model.User{Email: name + "@example.com", PasswordHash: storetest.FakePasswordHash}
	token := storetest.TokenHash(name)
	if _, err := db.CreateUser(ctx, u, token, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	m, err := db.CreateMessage(ctx, model.ByToken(token), "a message of "+name)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, db, token, m.ID
}

// readMessage reads message id with token and checks it is the one asked
// for.
func readMessage(ctx context.Context, db *pg.DB, token model.TokenHash, id uint64) error {
	_, m, err := db.Message(ctx, model.ByToken(token), id)
	if err == nil && m.ID != id {
		err = fmt.Errorf("got message %d", m.ID)
	}
	return err
}

// sendHeld starts the reads in order, each queued before the next starts,
// then lets one batch take them all, and returns their outcomes.
func sendHeld(db *pg.DB, runs []func() error) []error {
	queued, release := db.HoldReads()
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, run := range runs {
		wg.Go(func() { errs[i] = run() })
		for queued() < i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	release()
	wg.Wait()
	return errs
}

// TestWordSearchesLeaveRoom: searches with words run on at most half the
// pool's connections; while that many run, another waits its turn (and
// stops waiting when its client leaves) and short reads still go through.
func TestWordSearchesLeaveRoom(t *testing.T) {
	ctx, db, token, id := openPosted(t, pg.Options{PoolSize: 6, TermStatsEvery: time.Hour}, "searcher")
	// Searches planned so as to go alone, whatever statistics say.
	db.ForcePlan("walk alone")
	words := model.SearchQuery{Terms: model.Terms("message")}

	taken, release := db.TakeWordSearchTurns()
	if want := max(1, 3-db.SearchBatches()); taken != want {
		t.Errorf("searches with words sent alone may take %d of 6 connections, want %d (3 less %d for their batches)", taken, want, db.SearchBatches())
	}
	waiting, leave := context.WithCancel(ctx)
	searched := make(chan error, 1)
	go func() {
		_, _, err := db.SearchMessages(waiting, model.ByToken(token), words)
		searched <- err
	}()
	if err := readMessage(ctx, db, token, id); err != nil {
		t.Errorf("a message read while searches with words take their share: %v", err)
	}
	if _, page, err := db.SearchMessages(ctx, model.ByToken(token), model.SearchQuery{}); err != nil || len(page.Messages) != 1 {
		t.Errorf("a page without words while searches with words take their share: %v", err)
	}
	select {
	case err := <-searched:
		t.Fatalf("a search with words beyond its share ran at once: %v", err)
	case <-time.After(time.Second):
	}
	leave()
	if err := <-searched; !errors.Is(err, context.Canceled) {
		t.Errorf("a search with words beyond its share, its client gone: %v, want context.Canceled", err)
	}
	release()
	if _, page, err := db.SearchMessages(ctx, model.ByToken(token), words); err != nil || len(page.Messages) != 1 {
		t.Errorf("a search with words once there is room: %v", err)
	}
}

// TestCloseWhileBusy: reads and creates that come while the store closes
// either finish or are refused, none hangs or outlives Close, and once
// it is closed they are refused at once.
func TestCloseWhileBusy(t *testing.T) {
	ctx, db, token, id := openPosted(t, pg.Options{}, "closer")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				var err error
				if i%2 == 0 {
					err = readMessage(ctx, db, token, id)
				} else {
					_, err = db.CreateMessage(ctx, model.ByToken(token), "while closing")
				}
				if err != nil {
					return
				}
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("reads and creates went on after Close")
	}
	if err := readMessage(ctx, db, token, id); !errors.Is(err, pg.ErrClosed) {
		t.Errorf("a read after Close: %v, want the store closed", err)
	}
	if _, err := db.CreateMessage(ctx, model.ByToken(token), "after closing"); !errors.Is(err, pg.ErrClosed) {
		t.Errorf("a create after Close: %v, want the store closed", err)
	}
}
