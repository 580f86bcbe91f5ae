package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"herald/bolt"
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
			want: []string{"tokens", "changes 168h0m0s 100000", "codes"}},
		{name: "everything kept for a while", chores: storeChores{retain: 720 * time.Hour, changesKeepFor: time.Hour, changesKeepMax: 10,
			auditKeepFor: 2160 * time.Hour, auditKeepMax: 5000},
			want: []string{"tokens", "messages before 2026-10-27T12:00:00Z", "changes 1h0m0s 10", "audit 2160h0m0s 5000", "codes"}},
		{name: "bounds by count alone", chores: storeChores{changesKeepMax: 7, auditKeepMax: 3},
			want: []string{"tokens", "changes 0s 7", "audit 0s 3", "codes"}},
		{name: "nothing bounded", want: []string{"tokens", "codes"}},
		{name: "a chore fails", chores: storeChores{changesKeepMax: 7, auditKeepMax: 3}, trimFails: true,
			want: []string{"tokens", "changes 0s 7", "audit 0s 3", "codes"}, wantReport: []string{"trimming the change log: the disk is on fire"}},
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
