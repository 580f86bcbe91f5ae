package pg

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Reads sent together. A read on PostgreSQL is a round trip: Herald writes
// its statements to a connection, PostgreSQL's backend wakes, runs them and
// answers, Herald wakes and reads. On a few cores the wake-ups, not the
// statements, are most of the cost: an HTTP server that reads one row by
// primary key per request serves about twice the requests when the reads of
// concurrent requests go to PostgreSQL together, one pipeline of many reads
// on one connection, as bench/floor/pgbaseline shows
// (docs/performance.md, "PostgreSQL: reads sent together"). So the short
// reads of the hot paths (a message by ID, a page without words) are queued
// and sent in batches, as creates are (batches.go), with up to
// readConcurrency batches in flight.
//
// A batch is one pipeline ending in one Sync, so its statements share an
// implicit transaction: each still reads committed data as of its own
// start (READ COMMITTED takes a snapshot per statement), but a statement
// that fails fails those after it, and so does a connection lost or a
// batch out of time. When a batch fails, each of its reads still waited
// for goes again alone, with time of its own, so a statement's error
// reaches only the read it belongs to. Reads are retried safely: they
// write nothing (a token's use is noted in memory, twice at worst).
//
// A read whose client goes away, or whose call's deadline passes, stops
// waiting at once; its statements still go with the batch unless the
// batch is not yet formed, then they are dropped. A batch, and each read
// sent again alone, has the store's deadline of a call (Options.Timeout)
// of its own.
//
// Searches with words that fill a page early by the terms' statistics
// are sent together too, in batches of their own (search.go); the others
// each go alone, to be cancelled when their client leaves.

// maxReadBatch bounds the reads of one pipeline.
const maxReadBatch = 64

// readOp is one read waiting for its batch. queue adds its statements to
// a batch; read reads their results, every one of them, in order, keeping
// what it finds, and returns the read's outcome. Both may run twice (the
// second time alone), so read must set, not accumulate.
type readOp struct {
	ctx        context.Context // the caller's: once it ends, nobody waits
	queue      func(b *pgx.Batch)
	read       func(br pgx.BatchResults) error
	statements int
	err        error
	done       chan struct{}
}

// readConcurrency is how many batches of reads may be in flight at once:
// one a CPU, so each core can be writing, or reading, one. More batches
// in flight make each smaller, and it is their number that costs.
func readConcurrency() int { return max(2, runtime.GOMAXPROCS(0)) }

// readTogether runs a read in the next batch of reads and returns its
// outcome, or ctx's error when ctx ends first: the batch goes on without
// its caller, and what read keeps is then never looked at.
func (db *DB) readTogether(ctx context.Context, queue func(b *pgx.Batch), read func(br pgx.BatchResults) error) error {
	return db.sendTogether(ctx, &db.reads, queue, read)
}

// sendTogether is readTogether in the batches given.
func (db *DB) sendTogether(ctx context.Context, in *batches[*readOp], queue func(b *pgx.Batch), read func(br pgx.BatchResults) error) error {
	op := &readOp{ctx: ctx, queue: queue, read: read, done: make(chan struct{})}
	if !in.add(op) {
		return errClosed
	}
	select {
	case <-op.done:
		return op.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendReadBatch runs one batch and answers each of its reads.
func (db *DB) sendReadBatch(batch []*readOp) {
	waited := batch[:0:0]
	for _, op := range batch {
		if err := op.ctx.Err(); err != nil {
			// Its caller has gone: nothing to send. The error still says
			// so, for a caller that sees done before its context's end.
			op.err = err
			close(op.done)
			continue
		}
		waited = append(waited, op)
	}
	batch = waited
	if len(batch) > 1 && db.sendReadsTogether(batch) == nil {
		for _, op := range batch {
			close(op.done)
		}
		return
	}
	for _, op := range batch {
		if op.err = op.ctx.Err(); op.err == nil {
			db.sendReadAlone(op)
		}
		close(op.done)
	}
}

// sendReadAlone runs one read in a round trip of its own.
func (db *DB) sendReadAlone(op *readOp) {
	ctx, cancel := context.WithTimeout(db.life, db.timeout)
	defer cancel()
	op.err = db.sendAlone(ctx, op.queue, func(br pgx.BatchResults) error { return db.readOwn(op, br) })
}

// sendAlone sends what queue adds in a round trip of its own, on ctx, and
// returns read's outcome, else the pipeline's error.
func (db *DB) sendAlone(ctx context.Context, queue func(b *pgx.Batch), read func(br pgx.BatchResults) error) error {
	b := &pgx.Batch{}
	queue(b)
	br := db.pool.SendBatch(ctx, b)
	// As its share of a batch, so that its rows are read the same way.
	err := read(&ownResults{br: br, left: b.Len()})
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// sendReadsTogether sends the batch's reads in one pipeline and lets each
// read its own results. The error is the pipeline's: a statement failed,
// the connection was lost or the batch ran out of time, so every read's
// outcome is in doubt.
func (db *DB) sendReadsTogether(batch []*readOp) error {
	ctx, cancel := context.WithTimeout(db.life, db.timeout)
	defer cancel()
	b := &pgx.Batch{}
	for _, op := range batch {
		before := b.Len()
		op.queue(b)
		op.statements = b.Len() - before
	}
	br := db.pool.SendBatch(ctx, b)
	for _, op := range batch {
		own := &ownResults{br: br, left: op.statements}
		op.err = db.readOwn(op, own)
		own.skipRest()
	}
	return br.Close()
}

// readOwn runs op's read on br. A read runs on the batch's goroutine, not
// its request's, so a panic in it is turned into that read's error here
// rather than ending the process.
func (db *DB) readOwn(op *readOp, br pgx.BatchResults) (err error) {
	defer func() {
		if p := recover(); p != nil {
			db.log.Error("a read sent together panicked", "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("pg: a read panicked: %v", p)
		}
	}()
	return op.read(br)
}

// ownResults is one read's share of a batch's results: a read that stops
// early leaves its other results unread, and one that reads too many would
// get the next read's; ownResults skips the first and refuses the second.
type ownResults struct {
	br   pgx.BatchResults
	left int
	rows pgx.Rows // the last rows handed out, closed before the next
}

var errNotOwn = errors.New("pg: a read asked for more results than it queued")

func (o *ownResults) next() bool {
	if o.rows != nil {
		o.rows.Close()
		o.rows = nil
	}
	if o.left == 0 {
		return false
	}
	o.left--
	return true
}

func (o *ownResults) Exec() (pgconn.CommandTag, error) {
	if !o.next() {
		return pgconn.CommandTag{}, errNotOwn
	}
	return o.br.Exec()
}

func (o *ownResults) Query() (pgx.Rows, error) {
	if !o.next() {
		return nil, errNotOwn
	}
	rows, err := o.br.Query()
	o.rows = rows
	return rows, err
}

func (o *ownResults) QueryRow() pgx.Row {
	rows, err := o.Query()
	return ownRow{rows, err}
}

// Close is the batch's to call, not a read's.
func (o *ownResults) Close() error { return nil }

// Tx is nil: a batch of reads runs outside any transaction of Herald's.
func (o *ownResults) Tx() pgx.Tx { return nil }

// skipRest closes what the read left open and skips its unread results.
func (o *ownResults) skipRest() {
	for o.next() {
		_, _ = o.br.Exec()
	}
}

// ownRow is pgx's QueryRow on a row of ownResults, read by scanWire.
type ownRow struct {
	rows pgx.Rows
	err  error
}

func (r ownRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := scanWire(r.rows, dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}
