package main

import (
	"log/slog"
	"time"
)

// logFlushInterval is the longest a log line waits in memory.
const logFlushInterval = 200 * time.Millisecond

// durationsInMillis rewrites a duration attribute as a number of
// milliseconds, its key suffixed _ms so the unit travels with it.
func durationsInMillis(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key+"_ms", float64(a.Value.Duration())/float64(time.Millisecond))
	}
	return a
}
