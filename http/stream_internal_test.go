package http

import (
	"testing"
	"time"
)

// TestRoundGap: the gap between rounds grows with the writes a round made
// and, past the busy rate, with the rate changes commit at, within its
// floor and cap.
func TestRoundGap(t *testing.T) {
	for _, tt := range []struct {
		writes int
		rate   float64
		want   time.Duration
	}{
		{0, 0, streamRoundGap},
		{1, 5000, streamRoundGap},
		{100, 100, streamRoundGap},           // 2.5 ms of writes: the floor
		{1000, 0, 25 * time.Millisecond},     // 25 µs a write
		{1000, 200, 25 * time.Millisecond},   // below the busy rate
		{1000, 400, 25 * time.Millisecond},   // at it
		{1000, 800, 50 * time.Millisecond},   // twice it: twice the gap
		{1000, 2000, 125 * time.Millisecond}, // five times
		{1000, 100000, streamRoundGapMax},    // capped
		{10000, 0, streamRoundGapMax},        // 250 ms of writes: the cap
		{4000, 0, 100 * time.Millisecond},    // in between
	} {
		if got := roundGap(tt.writes, tt.rate); got != tt.want {
			t.Errorf("roundGap(%d writes, %.0f/s) = %v, want %v", tt.writes, tt.rate, got, tt.want)
		}
	}
}
