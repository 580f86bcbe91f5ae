package http

import (
	"io"
	"sync"
	"time"
)

// LogWriter batches log output. Every request writes an access log line,
// and written straight to stderr that is one write(2) per request, made
// while slog's handler holds its lock, which shows in the server's CPU
// under load (docs/performance.md, "HTTP: where a request's time goes").
// Lines are kept in memory and written together when the buffer passes
// logBatchBytes, when the oldest line has waited the flush interval, and on
// Close — so a line reaches the output within the interval, and only a
// process killed outright loses the last interval's lines.
type LogWriter struct {
	out   io.Writer
	every time.Duration

	mu     sync.Mutex // guards buf, spare, timer, armed and closed
	buf    []byte     // lines not yet written
	spare  []byte     // the previous batch's memory, for the next one
	timer  *time.Timer
	armed  bool // timer will flush buf
	closed bool

	// outMu is held while a batch is written. It is taken before mu is
	// released and never the other way round, so batches reach out in the
	// order their lines came.
	outMu sync.Mutex
	err   error // the first failed write to out; guarded by outMu
}

// logBatchBytes is the most a LogWriter holds before writing: a few
// hundred access log lines, and a few write(2)s a second at full load.
const logBatchBytes = 64 << 10

// NewLogWriter batches writes to out, flushing at least every interval
// (a second at most is sensible: people tail logs). Close it to flush the
// rest; writes after Close go straight to out.
func NewLogWriter(out io.Writer, interval time.Duration) *LogWriter {
	return &LogWriter{out: out, every: interval}
}

// Write keeps a copy of p for the next flush. It returns an error only
// after Close, from out; a failed flush is reported by Close.
func (w *LogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.closed {
		w.outMu.Lock()
		w.mu.Unlock()
		defer w.outMu.Unlock()
		return w.out.Write(p)
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= logBatchBytes {
		w.flushLocked()
		return len(p), nil
	}
	if !w.armed {
		w.armed = true
		if w.timer == nil {
			w.timer = time.AfterFunc(w.every, w.Flush)
		} else {
			w.timer.Reset(w.every)
		}
	}
	w.mu.Unlock()
	return len(p), nil
}

// Flush writes what is buffered now.
func (w *LogWriter) Flush() {
	w.mu.Lock()
	w.flushLocked()
}

// Close flushes and makes later writes unbuffered. It returns the first
// error writing to out, if any.
func (w *LogWriter) Close() error {
	w.mu.Lock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	w.flushLocked()
	// A flush still writing finishes first, so Close returns with
	// everything written.
	w.outMu.Lock()
	defer w.outMu.Unlock()
	return w.err
}

// flushLocked writes the buffer; it is called with mu held and returns
// with mu released.
func (w *LogWriter) flushLocked() {
	w.armed = false
	if len(w.buf) == 0 {
		w.mu.Unlock()
		return
	}
	batch := w.buf
	w.buf, w.spare = w.spare[:0], nil
	w.outMu.Lock()
	w.mu.Unlock()
	if _, err := w.out.Write(batch); err != nil && w.err == nil {
		w.err = err
	}
	// outMu goes first: taking mu while holding it would deadlock with a
	// writer that holds mu and waits for outMu.
	w.outMu.Unlock()
	w.mu.Lock()
	if cap(batch) <= 2*logBatchBytes { // one huge line is not kept for ever
		w.spare = batch[:0]
	}
	w.mu.Unlock()
}
