package pg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
	"herald/storetest"
)

// An administrator's role taken away while an act of theirs waits for a
// lock: either the act is refused, or it lands before the role was taken
// away, and the audit log says so in that order. Never both the act after
// the role was gone. b, an administrator, acts on c while another
// transaction holds the row the act needs; a takes b's role away; then the
// row is let go.
func TestAdministratorsRoleTakenAwayMidAct(t *testing.T) {
	for _, tc := range []struct {
		name string
		held string // the row another transaction holds: the message's ($1) or c's ($2)
		act  func(ctx context.Context, db *pg.DB, b model.TokenHash, c *model.User, msg uint64) error
		// refused: the act reads b's role after its wait and is refused;
		// else it holds b's role while it waits, and the change of role
		// waits for it.
		refused bool
	}{
		{"moderation", "SELECT 1 FROM messages WHERE id = $1 AND $2::bigint > 0 FOR UPDATE", func(ctx context.Context, db *pg.DB, b model.TokenHash, _ *model.User, msg uint64) error {
			_, err := db.DeleteMessage(ctx, msg, model.ByToken(b), nil)
			return err
		}, true},
		{"suspension", "SELECT 1 FROM users WHERE id = $2 AND $1::bigint > 0 FOR UPDATE", func(ctx context.Context, db *pg.DB, b model.TokenHash, c *model.User, _ uint64) error {
			yes := true
			_, err := db.UpdateAccount(ctx, model.ByToken(b), c.ID, model.AccountUpdate{Suspended: &yes})
			return err
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			db, url := open(t, pg.Options{})
			account := func(email string, admin bool) (*model.User, model.TokenHash) {
				u := &model.User{Email: email, PasswordHash: storetest.FakePasswordHash}
				tok := storetest.TokenHash(email)
				if _, err := db.CreateUser(ctx, u, tok, time.Hour, nil); err != nil {
					t.Fatal(err)
				}
				if admin {
					yes := true
					if _, err := db.UpdateAccount(ctx, model.ByServer(), u.ID, model.AccountUpdate{Admin: &yes}); err != nil {
						t.Fatal(err)
					}
				}
				return u, tok
			}
			_, aTok := account("a@example.com", true)
			b, bTok := account("b@example.com", true)
			c, _ := account("c@example.com", false)
			m, err := db.CreateMessage(ctx, model.ByUser(c.ID), "c's message")
			if err != nil {
				t.Fatal(err)
			}
			conn, err := pgx.Connect(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			hold, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := hold.Exec(ctx, tc.held, int64(m.ID), int64(c.ID)); err != nil {
				t.Fatal(err)
			}
			acted := make(chan error, 1)
			go func() { acted <- tc.act(ctx, db, bTok, c, m.ID) }()
			waiting := func(n int64) {
				t.Helper()
				for deadline := time.Now().Add(10 * time.Second); ; {
					if time.Now().After(deadline) {
						t.Fatalf("%d locks never waited", n)
					}
					got, err := pgtest.QueryInt(ctx, url, "SELECT count(*) FROM pg_locks WHERE NOT granted")
					if err != nil {
						t.Fatal(err)
					}
					if got >= n {
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			waiting(1)
			no := false
			revoked := make(chan error, 1)
			go func() {
				_, err := db.UpdateAccount(ctx, model.ByToken(aTok), b.ID, model.AccountUpdate{Admin: &no})
				revoked <- err
			}()
			if tc.refused {
				if err := <-revoked; err != nil {
					t.Fatal(err)
				}
			} else {
				waiting(2) // the change of b's role waits for b's act
			}
			if err := hold.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			err = <-acted
			if !tc.refused {
				if err := <-revoked; err != nil {
					t.Fatal(err)
				}
			}
			if tc.refused && !errors.Is(err, model.ErrForbidden) {
				t.Errorf("b's act: %v; want it refused (forbidden)", err)
			}
			if !tc.refused && err != nil {
				t.Errorf("b's act: %v; want it done", err)
			}
			page, err := db.AuditLog(ctx, model.ByServer(), model.AuditQuery{})
			if err != nil {
				t.Fatal(err)
			}
			// Newest first: b's act, if any, must come before the revocation.
			for _, e := range page.Entries {
				if e.Action == model.AuditRevokeAdmin && e.UserID == b.ID {
					break
				}
				if e.ActorID == b.ID {
					t.Errorf("the audit log has b's %s (entry %d) after b's role was taken away", e.Action, e.ID)
				}
			}
		})
	}
}

// TestSuspendWhilePosting: an administrator suspends, or removes, an
// account whose devices keep posting through another instance. The
// administrator's write and the creates must not wait for each other:
// with deadlock_timeout raised to a minute, a deadlock between them would
// hold both, and every write waiting on the change log's counter, past
// the test's patience.
func TestSuspendWhilePosting(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	url := cluster.Database(t)
	if err := pgtest.Exec(ctx, cluster.URL("postgres"), "ALTER DATABASE "+pgtest.Name(url)+" SET deadlock_timeout = '1min'"); err != nil {
		t.Fatal(err)
	}
	a := openURL(t, url, pg.Options{})
	b := openURL(t, url, pg.Options{})
	root := &model.User{Email: "root@example.com", PasswordHash: storetest.FakePasswordHash}
	if err := a.CreateAdministrator(ctx, root); err != nil {
		t.Fatal(err)
	}
	for round := range 6 {
		u := &model.User{Email: fmt.Sprintf("spam%d@example.com", round), PasswordHash: storetest.FakePasswordHash}
		tokens := []model.TokenHash{storetest.TokenHash(fmt.Sprint("spam ", round))}
		if _, err := a.CreateUser(ctx, u, tokens[0], time.Hour, nil); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			h := storetest.TokenHash(fmt.Sprint("spam ", round, " device ", i))
			if _, err := a.IssueLoginToken(ctx, u.ID, u.PasswordHash, h, time.Hour); err != nil {
				t.Fatal(err)
			}
			tokens = append(tokens, h)
		}
		var posted atomic.Int64
		var wg sync.WaitGroup
		for _, tok := range tokens {
			for range 2 {
				wg.Go(func() {
					for {
						_, err := b.CreateMessage(ctx, model.ByToken(tok), "spam, spam, spam")
						switch {
						case errors.Is(err, model.ErrUnauthorized):
							return // suspended or removed: the token is gone
						case err != nil:
							t.Errorf("a create beside the administrator's write: %v", err)
							return
						}
						posted.Add(1)
					}
				})
			}
		}
		for posted.Load() < 50 {
			time.Sleep(time.Millisecond)
		}
		var err error
		if round%2 == 0 {
			suspend := true
			_, err = a.UpdateAccount(ctx, model.ByServer(), u.ID, model.AccountUpdate{Suspended: &suspend})
		} else {
			err = a.RemoveAccount(ctx, model.ByServer(), u.ID)
		}
		if err != nil {
			t.Fatalf("round %d: the administrator's write beside a flood of creates: %v", round, err)
		}
		wg.Wait()
	}
}
