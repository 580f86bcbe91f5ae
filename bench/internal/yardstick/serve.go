// Package yardstick serves the benchmarks' yardstick servers
// (bench/baseline, bench/floor/pgbaseline) the way Herald serves: net/http with
// Herald's timeouts, a "listening" log line in Herald's format, and a
// graceful stop.
package yardstick

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Serve serves h on addr until ctx ends, then shuts down gracefully. It
// logs "msg=listening addr=HOST:PORT" once listening, as Herald does, so
// the scripts find both the same way.
func Serve(ctx context.Context, addr string, h http.Handler, logger *slog.Logger) error {
	// The same timeouts as Herald's main.go.
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	logger.Info("listening", "addr", ln.Addr().String())
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
