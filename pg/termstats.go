package pg

import (
	"context"
	"time"
)

// Term statistics. The right plan for a search with words depends on how
// common its words are: walk the newest messages when they are common, read
// the rarest word's postings when it is rare (search.go). PostgreSQL can
// choose per request, but planning the search anew each time costs more
// than running it
// (docs/performance.md, "PostgreSQL: statements planned once"). So Herald
// chooses itself, from the statistics PostgreSQL's ANALYZE (autovacuum's,
// on every instance's database alike) keeps of the terms column: the most
// common terms and the share of messages holding each. Each plan is then
// prepared once, generic, and written so that PostgreSQL has one way to run
// it. Without statistics (a database not yet analysed) searches are planned
// per request.

// DefaultTermStatsEvery is how often an instance reads the statistics
// again: they change when the table is analysed (by autovacuum, minutes
// apart at most as often, or by hand), and reading them is one row.
const DefaultTermStatsEvery = 15 * time.Second

// termStats is what the planner's statistics say of messages' terms.
type termStats struct {
	share map[string]float64 // the most common terms: the share of messages holding each
	rare  float64            // the share assumed for any other term
	rows  float64            // messages, as last counted
}

const termStatsSQL = `SELECT s.most_common_elems::text::text[], s.most_common_elem_freqs,
	(SELECT reltuples FROM pg_class WHERE oid = 'messages'::regclass)
FROM pg_stats s WHERE s.schemaname = current_schema() AND s.tablename = 'messages' AND s.attname = 'terms'`

// loadTermStats reads the statistics; nil when there are none.
func (db *DB) loadTermStats(ctx context.Context) (*termStats, error) {
	var (
		terms  []string
		shares []float32
		rows   float32
	)
	rs, err := db.pool.Query(ctx, termStatsSQL)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	if !rs.Next() {
		return nil, rs.Err()
	}
	if err := rs.Scan(&terms, &shares, &rows); err != nil {
		return nil, err
	}
	// After the terms' shares come the least and the greatest of them,
	// then the share of null terms.
	if len(terms) == 0 || len(shares) < len(terms)+1 || rows <= 0 {
		return nil, nil
	}
	st := &termStats{share: make(map[string]float64, len(terms)), rows: float64(rows)}
	for i, t := range terms {
		st.share[t] = float64(shares[i])
	}
	// A term not listed is rarer than the least listed: half of it, as
	// PostgreSQL's own estimate assumes.
	st.rare = float64(shares[len(terms)]) / 2
	return st, nil
}

// refreshTermStats reads the statistics and plans searches from them
// from now on; it reports whether there were any.
func (db *DB) refreshTermStats(ctx context.Context) (bool, error) {
	st, err := db.loadTermStats(ctx)
	if err != nil {
		return false, err
	}
	db.terms.Store(st)
	return st != nil, nil
}

// followTermStats reads the statistics now and then every interval until
// Close.
func (db *DB) followTermStats(every time.Duration) {
	defer db.workers.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ctx, cancel := context.WithTimeout(db.life, 10*time.Second)
		st, err := db.loadTermStats(ctx)
		cancel()
		if err == nil {
			switch was := db.terms.Swap(st); {
			case was == nil && st != nil:
				db.log.Info("searches with words planned from PostgreSQL's statistics of the terms", "messages", int64(st.rows))
			case was != nil && st == nil:
				db.log.Info("no statistics of the terms: searches with words planned at each request")
			}
		} else if db.life.Err() == nil {
			db.log.Warn("reading the search terms' statistics; searches keep the plan they have", "err", err)
		}
		select {
		case <-t.C:
		case <-db.stop:
			return
		}
	}
}

// choose picks the plan for a search for terms, a page of n matches
// with the one that proves a next page, and whether it is sent together
// with others.
//
// The plan: by its values when there are no statistics; else the terms'
// postings when the rarest term's cost no more than walking the first
// window, and the messages they lead to (those holding every term: the
// index intersects the terms' postings before any message is read) are no
// more than the walk is expected to read before its page is full (n over
// the share of messages holding every term); else the walk. The second
// bound matters in a small table, where a word every third message holds
// has fewer postings than a window: reading all of them to keep a page
// costs PostgreSQL several times the short walk that finds the same page
// (docs/performance.md, "PostgreSQL: choosing a search's plan").
//
// Together, when by the statistics the search costs little more than a
// page without words and is planned once (one planned for its values sets
// its transaction's plan mode, which no pipeline may share): always when
// it reads postings, which it does only for a term that few messages hold,
// so every window reads a few of them at most; when it walks, if twice n
// matches are expected among the first window's messages, taking the
// terms as independent, so their shares multiply (twice, so that a search
// expected near the window's end does not spill into the next half the
// time). Words that are common each but seldom meet are so misjudged; the
// search then costs its windows, as any search at most does.
func (st *termStats) choose(terms []string, n int) (plan searchPlan, together bool) {
	if st == nil {
		return planByValues, false
	}
	rarest, all := 1.0, 1.0
	for _, t := range terms {
		share := st.shareOf(t)
		rarest = min(rarest, share)
		all *= share
	}
	if rarest*st.rows <= float64(windowSizes[0]) && all*st.rows <= float64(n)/all {
		return planPostings, true
	}
	return planWalk, float64(2*n) <= all*float64(windowSizes[0])
}

// shareOf is the share of messages holding term.
func (st *termStats) shareOf(term string) float64 {
	if share, ok := st.share[term]; ok {
		return share
	}
	return st.rare
}
