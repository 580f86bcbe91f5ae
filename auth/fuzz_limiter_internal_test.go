package auth

import (
	"fmt"
	"testing"
	"time"
)

// refLimiter is the unbounded Limiter the bounded one must match until it
// first overflows: one refill time per key, nothing ever evicted.
type refLimiter struct {
	every, slack, last int64
	refill             map[string]int64
}

func (r *refLimiter) check(key string, now int64) (bool, time.Duration) {
	if ahead := r.refill[key] - now; ahead > r.slack {
		return false, time.Duration(ahead - r.slack)
	}
	return true, 0
}

// FuzzLimiter runs a sequence of calls decoded from the input against a
// small Limiter and checks, after every call, what must always hold: it
// holds at most maxKeys keys (map and heap agreeing), retryAfter lies in
// [0, Every] and is 0 exactly when ok, Allow changes nothing and predicts
// Spend, and, until the first spend overflows into the sketch, every answer
// is the unbounded reference's. Seeds live in testdata/fuzz/FuzzLimiter.
//
// Input: burst, every (seconds; 0 means a zero Rate), maxKeys, then pairs
// (op, arg): op%6 picks Allow, Spend, Refund, Forget, advance or step back;
// arg picks one of 24 keys, or the time step in 1/16ths of Every.
func FuzzLimiter(f *testing.F) {
	f.Add([]byte{2, 10, 3, 1, 0, 1, 0, 1, 0, 0, 0, 4, 8, 1, 0})
	f.Add([]byte{0, 0, 0, 1, 1, 1, 1, 0, 1})
	f.Add([]byte{9, 255, 15, 1, 1, 1, 2, 1, 3, 1, 4, 2, 1, 3, 2, 4, 255, 5, 100, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		rate := Rate{Burst: int(data[0] % 12), Every: time.Duration(data[1]) * time.Second}
		maxKeys := 1 + int(data[2]%16)
		clock := newFakeClock()
		l := NewLimiter(rate, maxKeys, clock.Now)
		every := int64(rate.Every)
		ref := &refLimiter{every: every, slack: int64(max(rate.Burst, 1)-1) * every, refill: map[string]int64{}}
		ops := data[3:]
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%6, ops[i+1]
			key := fmt.Sprintf("k%d", arg%24)
			step := time.Duration(arg) * max(rate.Every, time.Second) / 16
			where := fmt.Sprintf("call %d (op %d, arg %d) with %+v, maxKeys %d", i/2, op, arg, rate, maxKeys)
			if op == 4 || op == 5 {
				if op == 5 {
					step = -step
				}
				clock.Advance(step)
				continue
			}
			if op == 3 {
				l.Forget(key)
				delete(ref.refill, key)
				continue
			}
			// The same reading the Limiter takes: Forget takes none.
			now := max(int64(clock.Now().Sub(l.epoch)), ref.last)
			ref.last = now
			exact := l.overflows == 0

			switch op {
			case 0, 1:
				ok1, wait1 := l.Allow(key)
				ok2, wait2 := l.Allow(key)
				if ok1 != ok2 || wait1 != wait2 {
					t.Fatalf("%s: Allow twice = (%v, %v) then (%v, %v)", where, ok1, wait1, ok2, wait2)
				}
				ok, wait := ok1, wait1
				if op == 1 {
					ok, wait = l.Spend(key)
					if ok != ok1 || wait != wait1 {
						t.Fatalf("%s: Allow = (%v, %v) but Spend = (%v, %v)", where, ok1, wait1, ok, wait)
					}
				}
				if wait < 0 || wait > rate.Every || ok != (wait == 0) {
					t.Fatalf("%s: got (%v, %v), want ok exactly when retryAfter is 0, and 0 <= retryAfter <= %v", where, ok, wait, rate.Every)
				}
				refOK, refWait := ref.check(key, now)
				if exact && (ok != refOK || wait != refWait) {
					t.Fatalf("%s: got (%v, %v), unbounded reference (%v, %v)", where, ok, wait, refOK, refWait)
				}
				if op == 1 && refOK {
					ref.refill[key] = addSat(max(ref.refill[key], now), every)
				}
			case 2:
				l.Refund(key)
				if r, ok := ref.refill[key]; ok {
					if r -= every; r <= now {
						delete(ref.refill, key)
					} else {
						ref.refill[key] = r
					}
				}
			}

			if got := l.len(); got > maxKeys {
				t.Fatalf("%s: holds %d keys, maxKeys %d", where, got, maxKeys)
			}
			if got, want := len(l.byRefill), len(l.buckets); got != want {
				t.Fatalf("%s: heap holds %d buckets, map %d", where, got, want)
			}
			for i, b := range l.byRefill {
				if b.pos != i || l.buckets[b.key] != b {
					t.Fatalf("%s: heap slot %d holds a bucket that thinks it is at %d", where, i, b.pos)
				}
				if parent := (i - 1) / 2; i > 0 && l.byRefill[parent].refill > b.refill {
					t.Fatalf("%s: heap order broken at %d", where, i)
				}
			}
		}
	})
}
