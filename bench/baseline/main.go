// Command baseline is the yardstick for bench/scale.sh: the smallest server
// built like Herald (net/http, httprouter, encoding/json, Herald's
// http.Server timeouts) but doing no work, so Herald's figures can be read
// as multiples of what this machine gives an empty handler at the same
// moment.
//
// It serves GET /healthz with {"status":"ok"}, listens on 127.0.0.1:0 unless
// told otherwise, and logs "msg=listening addr=127.0.0.1:NNNNN" on stderr
// in the same format as Herald, so the script reads both the same way.
// SIGINT or SIGTERM stops it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/julienschmidt/httprouter"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "`address` to listen on (host:port)")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))

	router := httprouter.New()
	router.GET("/healthz", func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Status string `json:"status"`
		}{"ok"})
	})
	// The same timeouts as Herald's main.go.
	srv := &http.Server{
		Handler:           router,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		logger.Error("listen", "err", err)
		os.Exit(1)
	}
	logger.Info("listening", "addr", ln.Addr().String())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		logger.Error("serve", "err", err)
		os.Exit(1)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("shutdown", "err", err)
		os.Exit(1)
	}
}
