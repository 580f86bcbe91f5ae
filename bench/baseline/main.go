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
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/julienschmidt/httprouter"

	"herald/bench/internal/yardstick"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := yardstick.Serve(ctx, *addr, router, logger); err != nil {
		logger.Error("baseline", "err", err)
		os.Exit(1)
	}
}
