package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"herald/bolt"
	"herald/model"
	"herald/storetest"
)

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

// TestSweep: a sweep runs each chore the flags turn on, with what they
// keep, by the clock it is given; a chore that fails is reported and the
// others still run.
func TestSweep(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name       string
		chores     storeChores
		trimFails  bool
		want       []string
		wantReport []string
	}{
		{name: "defaults", chores: storeChores{changesKeepFor: 168 * time.Hour, changesKeepMax: 100000},
			want: []string{"tokens", "changes 168h0m0s 100000", "codes", "keys"}},
		{name: "everything kept for a while", chores: storeChores{retain: 720 * time.Hour, changesKeepFor: time.Hour, changesKeepMax: 10,
			auditKeepFor: 2160 * time.Hour, auditKeepMax: 5000},
			want: []string{"tokens", "messages before 2026-10-27T12:00:00Z", "changes 1h0m0s 10", "audit 2160h0m0s 5000", "codes", "keys"}},
		{name: "bounds by count alone", chores: storeChores{changesKeepMax: 7, auditKeepMax: 3},
			want: []string{"tokens", "changes 0s 7", "audit 0s 3", "codes", "keys"}},
		{name: "nothing bounded", want: []string{"tokens", "codes", "keys"}},
		{name: "a chore fails", chores: storeChores{changesKeepMax: 7, auditKeepMax: 3}, trimFails: true,
			want: []string{"tokens", "changes 0s 7", "audit 0s 3", "codes", "keys"}, wantReport: []string{"trimming the change log: the disk is on fire"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), bolt.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := db.Close(); err != nil {
					t.Error(err)
				}
			})
			s := &sweepRecorder{DB: db, trimFails: tt.trimFails}
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

// TestChoresFor: each flag reaches what the chores keep.
func TestChoresFor(t *testing.T) {
	cfg, err := parseConfig([]string{"--retain", "30d", "--changes-keep", "48h", "--changes-max", "7",
		"--audit-keep", "90d", "--audit-max", "5000"}, environ(nil), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := storeChores{every: 30 * time.Second, sweepEvery: time.Minute, retain: 720 * time.Hour,
		changesKeepFor: 48 * time.Hour, changesKeepMax: 7, auditKeepFor: 2160 * time.Hour, auditKeepMax: 5000}
	if got := choresFor(cfg); got != want {
		t.Errorf("choresFor = %+v, want %+v", got, want)
	}
}

// TestStoresRunTheSweeps: the store --db opens runs the sweeps in its
// chores, a bbolt file as PostgreSQL: a message past --retain goes.
func TestStoresRunTheSweeps(t *testing.T) {
	for _, tt := range []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"bbolt", func(t *testing.T) string { return filepath.Join(t.TempDir(), "herald.db") }},
		{"postgres", func(t *testing.T) string { return postgresCluster(t).Database(t) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseConfig([]string{"--db", tt.db(t)}, environ(nil), io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			db, err := openStore(ctx, cfg, 1, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := db.close(); err != nil {
					t.Error(err)
				}
			})
			u := &model.User{Email: "ada@example.com", PasswordHash: storetest.FakePasswordHash}
			if _, err := db.CreateUser(ctx, u, storetest.TokenHash("ada"), time.Hour, nil); err != nil {
				t.Fatal(err)
			}
			m, err := db.CreateMessage(ctx, model.ByUser(u.ID), "soon past retention")
			if err != nil {
				t.Fatal(err)
			}
			chores := choresFor(cfg)
			chores.every, chores.sweepEvery, chores.retain = 10*time.Millisecond, 10*time.Millisecond, time.Millisecond
			choresCtx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() {
				db.maintain(choresCtx, chores, func(chore string, err error) { t.Errorf("%s: %v", chore, err) })
			})
			defer wg.Wait()
			defer stop()
			// Polled, not timed: the deadline only keeps a broken loop
			// from hanging the test.
			deadline := time.Now().Add(10 * time.Second)
			for {
				_, _, err := db.Message(ctx, model.ByServer(), m.ID)
				if errors.Is(err, model.ErrNotFound) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("message %d after 10 s of chores with --retain 1ms: %v", m.ID, err)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// TestStoreOptions: long searches get half the CPUs setProcs reports, at
// least one, and not half the (doubled) scheduler slots.
func TestStoreOptions(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for cpus, want := range map[int]int{1: 1, 2: 1, 3: 1, 4: 2, 16: 8} {
		if got := storeOptions(cpus, logger, nil).LongSearches; got != want {
			t.Errorf("storeOptions(%d CPUs).LongSearches = %d, want %d", cpus, got, want)
		}
	}
	set := metrics.NewSet()
	opts := storeOptions(2, logger, set)
	if opts.OnCommit == nil {
		t.Fatal("storeOptions with metrics on: no OnCommit")
	}
	opts.OnCommit(time.Millisecond, 3)
	var out bytes.Buffer
	set.WritePrometheus(&out)
	if !strings.Contains(out.String(), "herald_db_commit_writes_count 1") {
		t.Errorf("metrics after one commit = %q, want herald_db_commit_writes_count 1", out.String())
	}
}
