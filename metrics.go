package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// serveMetrics serves set, and the process's go_* and process_* metrics,
// at /metrics on ln, a listener of its own; with profiler, Go's profiler
// too, at /debug/pprof/. It serves until the server it returns is closed.
func serveMetrics(ln net.Listener, set *metrics.Set, profiler bool) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		set.WritePrometheus(w)
		metrics.WriteProcessMetrics(w) // go_* and process_*: memory, GC, open files
	})
	if profiler {
		// On this listener's own mux. (net/http/pprof's init also puts
		// them on http.DefaultServeMux, which Herald never serves.)
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		// Long enough for a 60 s CPU profile.
		WriteTimeout: 90 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	return srv
}

// What a store offers the metrics beyond what every store does, each an
// interface checked for, as http/ checks for HotBackup.
type (
	// searchTurns is offered by a store whose costly searches wait for a
	// turn (bbolt).
	searchTurns interface {
		LongSearchLoad() (running, waiting int)
	}
	// storeFile is offered by a store kept in one file (bbolt).
	storeFile interface {
		FileSize() int64
	}
	// choresLead is offered by a store whose instances take turns leading
	// the service's chores (PostgreSQL).
	choresLead interface {
		Leading() bool
	}
)

// storeGauges adds to set the gauges of what db offers.
func storeGauges(set *metrics.Set, db store) {
	if s, ok := db.(searchTurns); ok {
		set.NewGauge("herald_search_costly_running", func() float64 { r, _ := s.LongSearchLoad(); return float64(r) })
		set.NewGauge("herald_search_costly_waiting", func() float64 { _, w := s.LongSearchLoad(); return float64(w) })
	}
	if f, ok := db.(storeFile); ok {
		set.NewGauge("herald_db_size_bytes", func() float64 { return float64(f.FileSize()) })
	}
	if l, ok := db.(choresLead); ok {
		set.NewGauge("herald_db_leading_chores", func() float64 {
			if l.Leading() {
				return 1
			}
			return 0
		})
	}
}
