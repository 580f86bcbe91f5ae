// Command pgbaseline is bench/floor/pgfloor.sh's yardstick for a read on
// PostgreSQL: bench/baseline's server (net/http, httprouter,
// encoding/json, Herald's timeouts) whose one handler reads one row by
// primary key through a pgx pool, prepared and cached as Herald's
// statements are, and answers it as JSON. No token, no second statement,
// no logging: what it serves is the most a server asking PostgreSQL once
// per request can serve on the same cores.
//
// Two ways to ask, as bench/floor/pgfloor.sh compares them: by default each
// request makes its own round trip; with --together the reads of
// concurrent requests go in one pipeline, as Herald's store sends its
// short reads (pg/readbatch.go), with as many pipelines in flight at once
// as Herald's (one a CPU, at least two).
//
// It serves GET /api/messages/:id (the path bench/random_get.lua asks
// for) from pgbench's table pgbench_accounts (pgbench -i), and GET
// /api/messages, a page: the 20 rows of highest key, one statement, as
// Herald's list_newest_20 reads 20 messages. GET /api/search?q=WORDS is a
// search's floor, on a table of messages bench/floor/pgfloor.sh writes
// (floor_messages: id, content, terms text[] under a GIN index): the 20
// newest messages holding every word, Herald's page when none is asked
// for (and one more, as Herald reads to prove a next page), in the one
// plan that suits the words, which the caller names: plan=walk walks the
// primary key down from the newest message to the one above=ID, checking
// each message's terms (for common words; without that bound a plan made
// once, for any words, reads the whole table and sorts it, the walk being
// priced for words that seldom match), plan=postings reads the words'
// postings from the GIN index and sorts the matches (for a rare word).
// Each statement is prepared once, so no request pays for planning. It
// listens on 127.0.0.1:0 unless told otherwise and logs
// "msg=listening addr=127.0.0.1:NNNNN" on stderr like Herald. SIGINT or
// SIGTERM stops it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/julienschmidt/httprouter"

	"herald/bench/internal/yardstick"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "`address` to listen on (host:port)")
	dbURL := flag.String("db", "", "PostgreSQL `URL` of a database pgbench -i has filled")
	together := flag.Bool("together", false, "send the reads of concurrent requests in one pipeline")
	poolSize := flag.Int("pool", 0, "connections in the pool (0: Herald's default, 4 a CPU and at least 8)")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if *dbURL == "" {
		logger.Error("--db is required")
		os.Exit(2)
	}
	if err := run(*addr, *dbURL, *poolSize, *together, logger); err != nil {
		logger.Error("pgbaseline", "err", err)
		os.Exit(1)
	}
}

type account struct {
	ID      int64  `json:"id"`
	Branch  int64  `json:"branch"`
	Balance int64  `json:"balance"`
	Filler  string `json:"filler"`
}

const (
	selectSQL = `SELECT aid, bid, abalance, filler FROM pgbench_accounts WHERE aid = $1`
	pageSQL   = `SELECT aid, bid, abalance, filler FROM pgbench_accounts ORDER BY aid DESC LIMIT 20`
	// A search's rows fill account's fields: id, 0, 0, content. Written
	// as coalesce(terms, ...), the terms are not the indexed column, so
	// the walk cannot become a read of postings; ordered by id + 0, the
	// postings' matches cannot be walked down the primary key.
	walkSQL     = `SELECT id, 0::int, 0::int, content FROM floor_messages WHERE id > $2 AND coalesce(terms, '{}') @> $1::text[] ORDER BY id DESC LIMIT 21`
	postingsSQL = `SELECT id, 0::int, 0::int, content FROM floor_messages WHERE terms @> $1::text[] ORDER BY id + 0 DESC LIMIT 21`
)

// read is one request's statement, waiting for a pipeline when reads go
// together, and its answer.
type read struct {
	sql  string
	args []any
	one  bool // a row by key, which must be there
	rows []account
	err  error
	done chan struct{}
}

// scan reads r's answer from its statement's rows.
func (r *read) scan(rows pgx.Rows, err error) {
	if err != nil {
		r.err = err
		return
	}
	r.rows, r.err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (account, error) {
		var a account
		err := row.Scan(&a.ID, &a.Branch, &a.Balance, &a.Filler)
		return a, err
	})
	if r.err == nil && r.one && len(r.rows) == 0 {
		r.err = pgx.ErrNoRows
	}
}

// sendTogether takes the reads queued, as many as are there up to 64,
// and sends them in one pipeline, until ctx ends.
func sendTogether(ctx context.Context, pool *pgxpool.Pool, queue <-chan *read) {
	batch := make([]*read, 0, 64)
	for {
		batch = batch[:0]
		select {
		case r := <-queue:
			batch = append(batch, r)
		case <-ctx.Done():
			return
		}
	more:
		for len(batch) < cap(batch) {
			select {
			case r := <-queue:
				batch = append(batch, r)
			default:
				break more
			}
		}
		b := &pgx.Batch{}
		for _, r := range batch {
			b.Queue(r.sql, r.args...)
		}
		br := pool.SendBatch(ctx, b)
		for _, r := range batch {
			r.scan(br.Query())
		}
		if err := br.Close(); err != nil {
			for _, r := range batch {
				if r.err == nil {
					r.err = err
				}
			}
		}
		for _, r := range batch {
			close(r.done)
		}
	}
}

func run(addr, dbURL string, poolSize int, together bool, logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return err
	}
	if poolSize <= 0 {
		poolSize = max(8, 4*runtime.NumCPU())
	}
	cfg.MaxConns = int32(poolSize)
	// Planned once per connection, as Herald's statements are: left to
	// choose, PostgreSQL planned the walk anew at every request, its
	// generic plan priced for words that seldom match. (The row by key and
	// the page, planned each time before, are the same either way.)
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()

	queue := make(chan *read, 1024)
	if together {
		for range max(2, runtime.GOMAXPROCS(0)) {
			go sendTogether(ctx, pool, queue)
		}
	}
	ask := func(ctx context.Context, r *read) {
		if together {
			r.done = make(chan struct{})
			queue <- r
			<-r.done
			return
		}
		r.scan(pool.Query(ctx, r.sql, r.args...))
	}
	answer := func(w http.ResponseWriter, r *read, body any) {
		if errors.Is(r.err, pgx.ErrNoRows) {
			http.Error(w, "no such row", http.StatusNotFound)
			return
		}
		if r.err != nil {
			http.Error(w, "database error", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(body)
	}
	router := httprouter.New()
	router.GET("/api/messages/:id", func(w http.ResponseWriter, req *http.Request, ps httprouter.Params) {
		id, err := strconv.ParseInt(ps.ByName("id"), 10, 64)
		if err != nil {
			http.Error(w, "bad id", http.StatusBadRequest)
			return
		}
		r := &read{sql: selectSQL, args: []any{id}, one: true}
		ask(req.Context(), r)
		var body any
		if r.err == nil {
			body = &r.rows[0]
		}
		answer(w, r, body)
	})
	router.GET("/api/messages", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) {
		r := &read{sql: pageSQL}
		ask(req.Context(), r)
		answer(w, r, map[string]any{"messages": r.rows})
	})
	router.GET("/api/search", func(w http.ResponseWriter, req *http.Request, _ httprouter.Params) {
		terms := strings.Fields(req.URL.Query().Get("q"))
		if len(terms) == 0 {
			http.Error(w, "q must have words", http.StatusBadRequest)
			return
		}
		var r *read
		switch req.URL.Query().Get("plan") {
		case "walk":
			above, err := strconv.ParseInt(req.URL.Query().Get("above"), 10, 64)
			if err != nil {
				http.Error(w, "a walk needs above=ID", http.StatusBadRequest)
				return
			}
			r = &read{sql: walkSQL, args: []any{terms, above}}
		case "postings":
			r = &read{sql: postingsSQL, args: []any{terms}}
		default:
			http.Error(w, "plan must be walk or postings", http.StatusBadRequest)
			return
		}
		ask(req.Context(), r)
		answer(w, r, map[string]any{"messages": r.rows})
	})
	return yardstick.Serve(ctx, addr, router, logger)
}
