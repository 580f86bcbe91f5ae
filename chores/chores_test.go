package chores

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herald/bolt"
	"herald/model"
)

// openBolt opens a bbolt store in t's temporary directory, closed at
// cleanup.
func openBolt(t *testing.T) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// sweepRecorder is a bbolt store that notes each sweep it runs, with what
// it was asked to keep, and can fail the change log's trimming.
type sweepRecorder struct {
	*bolt.DB
	ran       []string
	trimFails bool
}

func (s *sweepRecorder) SweepExpiredTokens(ctx context.Context) (int, error) {
	s.ran = append(s.ran, "tokens")
	return s.DB.SweepExpiredTokens(ctx)
}

func (s *sweepRecorder) DeleteMessagesBefore(ctx context.Context, cutoff time.Time) (int, error) {
	s.ran = append(s.ran, "messages before "+cutoff.Format(time.RFC3339))
	return s.DB.DeleteMessagesBefore(ctx, cutoff)
}

func (s *sweepRecorder) TrimChanges(ctx context.Context, keepFor time.Duration, keepMax int) (int, error) {
	s.ran = append(s.ran, fmt.Sprintf("changes %v %d", keepFor, keepMax))
	if s.trimFails {
		return 0, errors.New("the disk is on fire")
	}
	return s.DB.TrimChanges(ctx, keepFor, keepMax)
}

func (s *sweepRecorder) TrimAudit(ctx context.Context, keepFor time.Duration, keepMax int) (int, error) {
	s.ran = append(s.ran, fmt.Sprintf("audit %v %d", keepFor, keepMax))
	return s.DB.TrimAudit(ctx, keepFor, keepMax)
}

func (s *sweepRecorder) SweepExpiredCodes(ctx context.Context) (int, error) {
	s.ran = append(s.ran, "codes")
	return s.DB.SweepExpiredCodes(ctx)
}

func (s *sweepRecorder) SweepIdempotencyKeys(ctx context.Context) (int, error) {
	s.ran = append(s.ran, "keys")
	return s.DB.SweepIdempotencyKeys(ctx)
}

func (s *sweepRecorder) TrimNotifications(ctx context.Context, keepFor time.Duration) (int, error) {
	s.ran = append(s.ran, fmt.Sprintf("notifications %v", keepFor))
	return s.DB.TrimNotifications(ctx, keepFor)
}

// TestSweep: a sweep runs each chore the configuration turns on, with
// what it keeps, by the clock it is given; a chore that fails is reported
// and the others still run.
func TestSweep(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name       string
		chores     Config
		trimFails  bool
		want       []string
		wantReport []string
	}{
		{name: "defaults", chores: Config{ChangesKeepFor: 168 * time.Hour, ChangesKeepMax: 100000},
			want: []string{"tokens", "changes 168h0m0s 100000", "codes", "keys"}},
		{name: "everything kept for a while", chores: Config{Retain: 720 * time.Hour, ChangesKeepFor: time.Hour, ChangesKeepMax: 10,
			AuditKeepFor: 2160 * time.Hour, AuditKeepMax: 5000, NotificationsKeepFor: 48 * time.Hour},
			want: []string{"tokens", "messages before 2026-10-27T12:00:00Z", "changes 1h0m0s 10", "audit 2160h0m0s 5000", "codes", "keys", "notifications 48h0m0s"}},
		{name: "bounds by count alone", chores: Config{ChangesKeepMax: 7, AuditKeepMax: 3},
			want: []string{"tokens", "changes 0s 7", "audit 0s 3", "codes", "keys"}},
		{name: "nothing bounded", want: []string{"tokens", "codes", "keys"}},
		{name: "a chore fails", chores: Config{ChangesKeepMax: 7, AuditKeepMax: 3}, trimFails: true,
			want: []string{"tokens", "changes 0s 7", "audit 0s 3", "codes", "keys"}, wantReport: []string{"trimming the change log: the disk is on fire"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &sweepRecorder{DB: openBolt(t), trimFails: tt.trimFails}
			var reported []string
			tt.chores.sweep(context.Background(), s, now, func(chore string, err error) {
				reported = append(reported, chore+": "+err.Error())
			})
			if !slices.Equal(s.ran, tt.want) {
				t.Errorf("ran %q, want %q", s.ran, tt.want)
			}
			if !slices.Equal(reported, tt.wantReport) {
				t.Errorf("reported %q, want %q", reported, tt.wantReport)
			}
		})
	}
}

// instance is a bbolt store standing for one of several instances on
// shared data: it leads when the test says so, and notes the sweeps it
// runs and whether it resigned.
type instance struct {
	*bolt.DB
	leads, resigned atomic.Bool
	asked, swept    atomic.Int64
}

func (in *instance) Leads(context.Context) bool {
	in.asked.Add(1)
	return in.leads.Load()
}

func (in *instance) Resign() { in.resigned.Store(true) }

func (in *instance) SweepExpiredTokens(ctx context.Context) (int, error) {
	in.swept.Add(1)
	return in.DB.SweepExpiredTokens(ctx)
}

// TestRunLeads: an instance that does not lead writes its token uses but
// runs no sweep; once it leads it sweeps; when the loop stops it resigns.
func TestRunLeads(t *testing.T) {
	in := &instance{DB: openBolt(t)}
	ctx := context.Background()
	u := &model.User{Email: "ada@example.com", PasswordHash: "$argon2id$v=19$m=65536,t=1,p=4$c2FsdA$aGFzaA"}
	token := model.TokenHash(sha256.Sum256([]byte("ada")))
	if _, err := in.CreateUser(ctx, u, token, time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := in.Authenticate(ctx, token); err != nil { // a use to write
		t.Fatal(err)
	}
	loopCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		Run(loopCtx, in, Config{FlushEvery: time.Millisecond, SweepEvery: time.Millisecond}, func(chore string, err error) {
			t.Errorf("%s: %v", chore, err)
		})
	})
	// Polled, not timed: the deadline only keeps a broken loop from
	// hanging the test.
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				stop()
				wg.Wait()
				t.Fatalf("no %s after 10 s of chores", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor("token use written", func() bool {
		toks, err := in.Tokens(ctx, u.ID)
		return err == nil && len(toks) == 1 && !toks[0].LastUsedAt.IsZero()
	})
	asked := in.asked.Load()
	waitFor("question of the lead", func() bool { return in.asked.Load() > asked+2 })
	if n := in.swept.Load(); n != 0 {
		t.Errorf("%d sweeps by an instance that does not lead", n)
	}
	in.leads.Store(true)
	waitFor("sweep by the leader", func() bool { return in.swept.Load() > 0 })
	if in.resigned.Load() {
		t.Error("resigned while the loop runs")
	}
	stop()
	wg.Wait()
	if !in.resigned.Load() {
		t.Error("the loop stopped without resigning")
	}
}
