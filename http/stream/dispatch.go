package stream

import (
	"context"
	"net"
	"slices"
	"time"
)

// The time between two of the dispatcher's rounds is at least
// streamRoundGap, and streamGapPerWrite for each write the last round made,
// up to streamRoundGapMax, which bounds an event's added delay. A write
// costs its syscall (on loopback, the receiver's side of TCP too) whatever
// it carries: so with many streams, fewer and fuller writes keep the
// fan-out to a small share of one core, leaving the rest to the writers
// (docs/performance.md, "Live stream: the dispatcher"). Above
// streamBusyRate changes a second the gap widens in proportion to the rate,
// since the bytes every stream must be sent grow with it: what the writes
// cost per call has to shrink to leave the writers their share. Measuring
// the writes' time instead would count the waits for a CPU of a busy
// machine as cost, and slow the streams exactly when delay hurts most.
const (
	streamRoundGap    = 10 * time.Millisecond
	streamGapPerWrite = 25 * time.Microsecond
	streamBusyRate    = 400
	streamRoundGapMax = 250 * time.Millisecond
)

// roundGap is the least time from the start of a round that made writes
// writes to the start of the next, with changes committing at rate a
// second.
func roundGap(writes int, rate float64) time.Duration {
	gap := time.Duration(float64(writes) * float64(streamGapPerWrite) * max(1, rate/streamBusyRate))
	return min(max(streamRoundGap, gap), streamRoundGapMax)
}

// keptPieces is the most pieces whose storage a stream keeps between
// rounds; runs rendered together make one piece, so this is most writes.
const keptPieces = 8

// register hands a caught-up stream to the dispatcher, starting it for the
// first stream; false once the hub is closing, or the stream has ended
// (one that left while catching up again, see rejoin).
func (h *Hub) register(sub *subscriber) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || sub.isEnded() {
		return false
	}
	h.live = append(h.live, sub)
	if !h.running {
		h.running = true
		// Revocations are read from the changes after this head, read
		// before the stream checks its token (after it registers): one
		// that commits in between is in neither.
		since, _, _ := h.feed.ChangeHead(context.Background())
		go h.dispatch(since)
	}
	h.wake()
	return true
}

// dispatch sends the live streams what each has not had, a round at a
// time: after each commit, but no sooner than the gap after the round
// before (see streamRoundGap), so commits close together reach each stream
// in one write.
// It also does the streams' housekeeping on a ticker, and returns when no
// stream is left.
//
// Revocations are read from the changes each round brings, after since to
// begin with: every stream registered checks its token once it has.
func (h *Hub) dispatch(since uint64) {
	ctx := context.Background() // the dispatcher outlives every request
	tick := time.NewTicker(h.housekeepingPeriod())
	defer tick.Stop()
	closing := h.closing
	var subs []*subscriber
	var lastTokenCheck, prevStart time.Time
	prevHead := since
	for {
		start := time.Now()
		roundCtx, cancel := context.WithTimeout(ctx, h.limits.StoreTimeout)
		head, commit, err := h.feed.ChangeHead(roundCtx)
		if err != nil {
			// Nothing is new that the dispatcher can know of; the
			// housekeeping below still runs.
			head, commit = prevHead, nil
		}
		h.mu.Lock()
		if len(h.live) == 0 {
			h.running = false
			h.mu.Unlock()
			cancel()
			return
		}
		subs = append(subs[:0], h.live...)
		h.mu.Unlock()
		writes := h.round(roundCtx, subs, prevHead, head, start)
		cancel()
		clear(subs) // hold no stream past its end

		select {
		case <-commit:
		case <-h.poke:
		case now := <-tick.C:
			checkTokens := now.Sub(lastTokenCheck) >= h.limits.TokenCheck
			if checkTokens {
				lastTokenCheck = now
			}
			h.mu.Lock()
			subs = append(subs[:0], h.live...)
			h.mu.Unlock()
			h.housekeep(subs, now, checkTokens)
			clear(subs)
		case <-closing:
			closing = nil // once is enough; the streams now end as their writes do
			h.mu.Lock()
			subs = append(subs[:0], h.live...)
			h.mu.Unlock()
			for _, sub := range subs {
				h.end(sub, shuttingDown, hint(shutdownText))
			}
			clear(subs)
		}
		var rate float64
		if !prevStart.IsZero() {
			rate = float64(head-prevHead) / start.Sub(prevStart).Seconds()
		}
		prevHead, prevStart = head, start
		gap := roundGap(writes, rate)
		if wait := gap - time.Since(start); wait > 0 {
			time.Sleep(wait)
		}
	}
}

// round sends each stream the events up to head that its filter passes,
// in one write, and ends the streams that lost their token (revoked in
// the changes after since) or fell too far behind. It returns how many
// writes it started.
func (h *Hub) round(ctx context.Context, subs []*subscriber, since, head uint64, now time.Time) (writes int) {
	window, windowErr := h.window.upTo(ctx, head)
	revoked, checkAll := revocations(window, since, head)
	// The writes are planned first and made after: the round takes the
	// bytes of the events they send from liveMemory once, for all of them.
	type planned struct {
		sub        *subscriber
		out        net.Buffers
		from, last uint64 // the positions sent: after from, up to last
	}
	var plan []planned
	for _, sub := range subs {
		if sub.isEnded() {
			continue
		}
		if checkAll || revoked[sub.userID] {
			if fails, reason := h.tokenFails(sub); fails {
				h.end(sub, reason, nil)
				continue
			}
		}
		if sub.last >= head {
			continue
		}
		if sub.writing.Load() {
			// Still writing what it was handed before: it falls behind, and
			// is cut once too far behind to be worth waiting for.
			if head-sub.last > uint64(h.limits.MaxLag) {
				h.end(sub, fellBehind, nil)
			}
			continue
		}
		if windowErr != nil {
			// The client resumes from the log when it reconnects.
			h.end(sub, storeFailed, hint(behindText))
			continue
		}
		evs, err := eventsAfter(window, sub.last, head)
		if err != nil {
			// Behind the window: it catches up from the log.
			h.demote(sub)
			continue
		}
		// The stream is not writing, so its pieces are free to reuse.
		out, _, n := sub.filter.gather(sub.pieces[:0], evs, liveWriteBytes, nil, 0)
		// Keep the storage of a few pieces for the next round, not of the
		// many a filter passing every other event of a busy round needs:
		// thousands of streams would hold it between rounds.
		sub.pieces = nil
		if cap(out) <= keptPieces {
			sub.pieces = out
		}
		last := head
		if n < len(evs) {
			last = evs[n-1].seq // the rest next round
		}
		plan = append(plan, planned{sub, out, sub.last, last})
	}
	if len(plan) == 0 {
		return 0
	}
	from, last := plan[0].from, plan[0].last
	for _, p := range plan {
		from, last = min(from, p.from), max(last, p.last)
	}
	sent, _ := eventsAfter(window, from, last)
	hold := &roundHold{h: h}
	for _, ev := range sent {
		hold.bytes += len(ev.text)
	}
	if !h.lives.tryAcquire(hold.bytes) {
		// Spent: the streams wait for a round that finds it free (a
		// release wakes the dispatcher), falling behind meanwhile.
		return 0
	}
	hold.pending.Store(1) // until every write is handed out
	for _, p := range plan {
		p.sub.last = p.last
		if len(p.out) > 0 {
			hold.pending.Add(1)
			h.send(p.sub, p.out, hold, now)
			writes++
		}
	}
	hold.done()
	return writes
}

// demote takes sub, behind the window, from the dispatcher, and has it
// catch up from the log (rejoin).
func (h *Hub) demote(sub *subscriber) {
	h.mu.Lock()
	if i := slices.Index(h.live, sub); i >= 0 {
		h.live = slices.Delete(h.live, i, i+1)
	}
	h.mu.Unlock()
	go h.rejoin(sub)
}

// housekeep ends streams whose token expired or stopped working, or whose
// write has taken too long, and sends a heartbeat to those silent too long.
func (h *Hub) housekeep(subs []*subscriber, now time.Time, checkTokens bool) {
	storeNow := h.now()
	for _, sub := range subs {
		if sub.isEnded() {
			continue
		}
		if !storeNow.Before(sub.expires) {
			h.end(sub, tokenEnded, nil)
			continue
		}
		if checkTokens {
			if fails, reason := h.tokenFails(sub); fails {
				h.end(sub, reason, nil)
				continue
			}
		}
		switch {
		case sub.writing.Load():
			if now.Sub(sub.lastSend) > h.limits.WriteTimeout {
				h.end(sub, clientStalled, nil)
			}
		case now.Sub(sub.lastSend) >= h.limits.Heartbeat:
			h.send(sub, net.Buffers{[]byte(keepAliveText)}, nil, now)
		}
	}
}

// housekeepingPeriod is how often housekeep runs: often enough for the
// shortest of the intervals it enforces, and at most once a second.
func (h *Hub) housekeepingPeriod() time.Duration {
	l := h.limits
	return min(max(min(l.Heartbeat, l.WriteTimeout, l.TokenCheck)/4, 10*time.Millisecond), time.Second)
}

// revocations returns the accounts whose tokens the changes of window
// after since, up to head, revoked; all is true when the window no longer
// holds those changes, and every stream must check its token.
func revocations(window []*event, since, head uint64) (accounts map[uint64]bool, all bool) {
	evs, err := eventsAfter(window, since, head)
	if err != nil {
		return nil, true
	}
	for _, ev := range evs {
		if ev.revoked != 0 {
			if accounts == nil {
				accounts = make(map[uint64]bool)
			}
			accounts[ev.revoked] = true
		}
	}
	return accounts, false
}
