package main

import (
	"github.com/VictoriaMetrics/metrics"
)

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
