package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"herald/chores"
	"herald/model"
	"herald/storetest"
)

// TestStoresRunTheSweeps: the chores run on the store --db opens, a bbolt
// file as PostgreSQL, and sweep it: a message past --retain goes.
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
				if err := db.Close(); err != nil {
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
			c := choresFor(cfg)
			c.FlushEvery, c.SweepEvery, c.Retain = 10*time.Millisecond, 10*time.Millisecond, time.Millisecond
			choresCtx, stop := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() {
				chores.Run(choresCtx, db, c, func(chore string, err error) { t.Errorf("%s: %v", chore, err) })
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
