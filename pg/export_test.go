package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// ErrClosed is what an operation gets after Close.
var ErrClosed = errClosed

// ByteaString is byteaString, a destination scanWire reads.
type ByteaString = byteaString

// SearchSpan is searchSpan, for tests that build a worst case beyond it.
var SearchSpan = searchSpan

// CreateBatch writes creates as one group commit does, for tests that
// need a batch of a known make-up.
func (db *DB) CreateBatch(ctx context.Context, by []model.Caller, contents []string) ([]*model.Message, []error, error) {
	results, err := db.createBatch(ctx, createOps(by, contents))
	if err != nil {
		return nil, nil, err
	}
	msgs, errs := answers(results)
	return msgs, errs, nil
}

// PostBatch writes drafts by the callers by as one group commit of posts
// does, for tests that check each post is answered on its own.
func (db *DB) PostBatch(ctx context.Context, by []model.Caller, drafts []model.Draft) ([]*model.Message, []error) {
	ops := make([]*createOp, len(by))
	for i, d := range drafts {
		ops[i] = &createOp{by: by[i], content: d.Content, terms: model.SortedTerms(d.Content), replyTo: d.ReplyTo,
			done: make(chan createResult, 1)}
	}
	db.commitPosts(ctx, ops)
	results := make([]createResult, len(ops))
	for i, op := range ops {
		results[i] = <-op.done
	}
	return answers(results)
}

// createOps are the creates of contents by the callers by, in order.
func createOps(by []model.Caller, contents []string) []*createOp {
	ops := make([]*createOp, len(by))
	for i := range by {
		ops[i] = &createOp{by: by[i], content: contents[i], terms: model.SortedTerms(contents[i]), done: make(chan createResult, 1)}
	}
	return ops
}

// answers splits creates' results into messages and errors.
func answers(results []createResult) ([]*model.Message, []error) {
	msgs := make([]*model.Message, len(results))
	errs := make([]error, len(results))
	for i, r := range results {
		msgs[i], errs[i] = r.m, r.err
	}
	return msgs, errs
}

// Migrations is the schema's migrations, for tests that build a database
// as an older Herald left it.
var Migrations = migrations

// HoldReads keeps the reads sent together queued, none sent, until release
// is called; then one batch takes them (up to maxReadBatch), so a test
// knows a batch's make-up. queued tells how many wait. No read may be in
// flight when it is called.
func (db *DB) HoldReads() (queued func() int, release func()) {
	return hold(&db.reads)
}

// HoldSearches is HoldReads for the searches with words sent together.
func (db *DB) HoldSearches() (queued func() int, release func()) {
	return hold(&db.searches)
}

// HoldSpends is HoldReads for the shared limits' spends.
func (db *DB) HoldSpends() (queued func() int, release func()) {
	return hold(&db.spends)
}

func hold[T any](r *batches[T]) (queued func() int, release func()) {
	// A batch just answered may still be looking for the next: it would
	// take what is queued now.
	for {
		r.mu.Lock()
		idle := r.running == 0
		if idle {
			r.running += r.limit
		}
		r.mu.Unlock()
		if idle {
			break
		}
		time.Sleep(time.Millisecond)
	}
	queued = func() int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.queue)
	}
	release = func() {
		r.mu.Lock()
		r.running -= r.limit - 1
		r.mu.Unlock()
		r.workers.Add(1)
		go r.drain()
	}
	return queued, release
}

// FailingRead is a read, sent with the others, whose statement fails.
func (db *DB) FailingRead() error {
	return db.readTogether(context.Background(), func(b *pgx.Batch) { b.Queue("SELECT 1/0") }, func(br pgx.BatchResults) error {
		var n int
		return br.QueryRow().Scan(&n)
	})
}

// PanickingRead is a read, sent with the others, that panics reading its
// result.
func (db *DB) PanickingRead() error {
	return db.readTogether(context.Background(), func(b *pgx.Batch) { b.Queue("SELECT 1") }, func(br pgx.BatchResults) error {
		panic("a bug in a read")
	})
}

// SendGone sends a batch of one read whose caller has gone, as the
// batches do, and returns the outcome that read is given.
func (db *DB) SendGone(gone context.Context) error {
	op := &readOp{ctx: gone, queue: func(b *pgx.Batch) { b.Queue("SELECT 1") }, read: func(pgx.BatchResults) error { return nil }, done: make(chan struct{})}
	db.sendReadBatch([]*readOp{op})
	return op.err
}

// SearchBatches is how many batches of searches with words may be in
// flight at once.
func (db *DB) SearchBatches() int { return db.searches.limit }

// TakeWordSearchTurns takes every turn searches with words have, as if
// that many ran, until release is called; it returns how many it took.
func (db *DB) TakeWordSearchTurns() (taken int, release func()) {
	for range cap(db.wordSearches) {
		db.wordSearches <- struct{}{}
	}
	return cap(db.wordSearches), func() {
		for range cap(db.wordSearches) {
			<-db.wordSearches
		}
	}
}

// RefreshTermStats reads the search terms' statistics now, as the
// instance does every Options.TermStatsEvery, and reports whether there
// were any.
func (db *DB) RefreshTermStats(ctx context.Context) (bool, error) {
	return db.refreshTermStats(ctx)
}

// PlanFor names the plan a search for terms gets now.
func (db *DB) PlanFor(terms []string) string {
	plan, _ := db.terms.Load().choose(terms, 1)
	return [...]string{"by values", "walk", "postings"}[plan]
}

// FillsEarly reports whether a search for terms, a page of limit, is sent
// together with others now.
func (db *DB) FillsEarly(terms []string, limit int) bool {
	_, together := db.terms.Load().choose(terms, limit+1)
	return together
}

// ForcePlan makes every search with words (and without owner or time
// filters) take the plan named, as PlanFor names them: "walk" sent
// together, "walk alone" sent alone, as if the words were rare together;
// "postings" sent together.
func (db *DB) ForcePlan(name string) {
	switch name {
	case "by values":
		db.terms.Store(nil)
	case "walk":
		db.terms.Store(&termStats{rare: 1, rows: 1e9})
	case "walk alone":
		db.terms.Store(&termStats{rare: 1e-5, rows: 1e9})
	case "postings":
		db.terms.Store(&termStats{rare: 0, rows: 1e9})
	default:
		panic("no plan " + name)
	}
}

// ScanWire is scanWire, and ReadWire reports whether it read the current
// row from the wire form itself, for the tests that compare it with pgx's
// Scan.
var ScanWire = scanWire

func ReadWire(rows pgx.Rows, dest ...any) bool { return readWire(rows, dest) }

// FillOwners is fillOwners, for the test of a page whose owner was
// deleted after the page was read.
func (db *DB) FillOwners(ctx context.Context, msgs []*model.Message) ([]*model.Message, error) {
	return db.fillOwners(ctx, msgs)
}

// OwnersKept is how many owners' addresses the instance keeps.
func (db *DB) OwnersKept() int {
	db.owners.mu.RLock()
	defer db.owners.mu.RUnlock()
	return len(db.owners.m)
}

// CommitBatch runs one group commit of the given creates, as the
// committer does, and returns each create's answer.
func (db *DB) CommitBatch(by []model.Caller, contents []string) ([]*model.Message, []error) {
	ops := createOps(by, contents)
	db.commitBatch(ops)
	results := make([]createResult, len(ops))
	for i, op := range ops {
		results[i] = <-op.done
	}
	return answers(results)
}

// CommitKeyed writes creates as the group committer writes one batch,
// each with its key (nil for none), and returns each create's answer.
func (db *DB) CommitKeyed(by []model.Caller, contents []string, keys []*model.IdempotencyKey) ([]*model.Message, []error) {
	ops := createOps(by, contents)
	for i, op := range ops {
		op.key = keys[i]
	}
	db.commitBatch(ops)
	results := make([]createResult, len(ops))
	for i, op := range ops {
		results[i] = <-op.done
	}
	return answers(results)
}

// Classify is classify: how the store's calls report a failure of
// PostgreSQL's.
func Classify(err error) error { return classify(err) }

// WriteTurns is how many write transactions may hold a connection at
// once, and WritesWaiting how many wait for a turn.
func (db *DB) WriteTurns() int    { return cap(db.writeTurns) }
func (db *DB) WritesWaiting() int { return int(db.writesWaiting.Load()) }
