package main

import (
	"io"
	"log/slog"
	"time"

	heraldhttp "herald/http"
)

// newLogger returns the server's logger, writing lines in format (text or
// json) to stderr, and the writer that holds them, whose Close writes the
// rest.
func newLogger(format string, stderr io.Writer) (*slog.Logger, io.Closer) {
	// The log is batched: a write(2) for every request's access log line
	// was a large share of the server's CPU under load (docs/performance.md,
	// "HTTP: where a request's time goes"). Lines still reach stderr within
	// logFlushInterval, and Close writes the rest before run returns.
	out := heraldhttp.NewLogWriter(stderr, logFlushInterval)
	var handler slog.Handler = slog.NewTextHandler(out, nil)
	if format == "json" {
		// Durations in milliseconds, which log tools graph, not the
		// nanosecond integers slog's JSON writes by default.
		handler = slog.NewJSONHandler(out, &slog.HandlerOptions{ReplaceAttr: durationsInMillis})
	}
	return slog.New(handler), out
}

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
