package auth

import (
	"container/heap"
	"context"
	"hash/maphash"
	"math"
	"net/netip"
	"sync"
	"time"
)

// Rate is a token bucket: Burst events may happen at once, then one more
// each Every. Over any span W at most Burst + ⌊W/Every⌋ events pass, which is
// the figure to check a Rate against.
//
// The zero Every never refuses; a Burst below 1 counts as 1 (a bucket that
// holds nothing would refuse forever).
type Rate struct {
	Burst int
	Every time.Duration
}

// A Spender counts events per key against a rate, wherever it keeps the
// counts: Spend takes one, or says how long until one is free; Refund
// gives one back. The HTTP server spends through it; a store that several
// processes share may count in its database, so that N processes never
// allow N times the budget, where a Limiter counts in this process's
// memory.
type Spender interface {
	Spend(ctx context.Context, key string) (ok bool, retryAfter time.Duration)
	Refund(ctx context.Context, key string)
}

// LoginFailuresPerAccount is 10 failed logins at once, then one more every
// 5 minutes: a guesser gets at most 10 + 12 = 22 tries on one account in any
// hour (298 in a day), an owner who mistypes twice still has 8 left, and an
// owner who has used them all waits at most 5 minutes for the next try.
func LoginFailuresPerAccount() Rate { return Rate{Burst: 10, Every: 5 * time.Minute} }

// LoginFailuresPerAddress is 20 failed logins at once, then one a minute (at
// most 80 in any hour). It is looser than the per-account limit because one
// address may front a whole office or carrier NAT; what it stops is one
// machine guessing one password across many accounts.
func LoginFailuresPerAddress() Rate { return Rate{Burst: 20, Every: time.Minute} }

// RegistrationsPerAddress is 20 registrations at once, then one every 45
// seconds: 20 + 3600/45 = 100 in any hour, never more. The burst lets a
// classroom behind one address sign up together.
func RegistrationsPerAddress() Rate { return Rate{Burst: 20, Every: 45 * time.Second} }

// ResetRequests is 3 requests for a password-reset link by e-mail, then
// one every 20 minutes: at most 3 an hour, per address and per client
// address, so nobody fills a mailbox with them.
func ResetRequests() Rate { return Rate{Burst: 3, Every: 20 * time.Minute} }

// WritesPerAccount is 60 creates, edits and deletes at once, then one
// every 5 seconds: 60 + 12 = 72 in the first minute, 60 + 720 = 780 in the
// first hour and at most 720 an hour after. A person writing by hand, a
// message every few seconds at the most, never meets it; a script that
// floods is stopped after its 60th write and then gets one through every
// 5 seconds.
func WritesPerAccount() Rate { return Rate{Burst: 60, Every: 5 * time.Second} }

// DefaultMaxKeys bounds the keys one Limiter holds exactly. Keys are kept
// as 64-bit hashes, so a long key costs no more than a short one: a held
// key takes a map slot, a heap slot and a 24-byte record, and the overflow
// sketch, allocated only if the map ever fills with penalties, 64 bytes a
// key: a few MiB in all
// (docs/performance.md, "Memory of the guessing limits").
const DefaultMaxKeys = 1 << 15

// Limiter counts events (failed logins, registrations) per key with one
// GCRA token bucket each, in bounded memory, and is safe for concurrent use.
//
// For logins, spend before hashing and give back on success:
//
//	okA, waitA := perAccount.Spend(email)
//	okB, waitB := perAddress.Spend(auth.AddressKey(ip))
//	// if either refused: Refund the one that was taken, answer 429 with
//	// Retry-After = max(waitA, waitB) rounded up to whole seconds
//	// verify the password (VerifyDummy when no account has that e-mail,
//	// so unknown e-mails are limited exactly like known ones)
//	// on success, or when no hash was computed (ErrBusy, ctx ended):
//	perAccount.Refund(email); perAddress.Refund(auth.AddressKey(ip))
//
// Spending first closes a race that Allow-then-Spend leaves open: a hundred
// concurrent guesses would all pass Allow before the first failure was
// recorded. Allow is for read-only questions such as "is this blocked?".
//
// A successful login gives back only the token its own attempt took, so it
// never clears failures recorded from another address for the same
// account. Never Forget a per-account or per-address key on success: that
// would hand a guesser a fresh burst whenever the owner logs in, or whenever
// the guesser logs in to an account of their own. Forget suits a limiter
// keyed by the pair (account, address), or an administrator's unlock.
//
// Memory: at most maxKeys buckets are held exactly, and only buckets with a
// penalty (a bucket that is full again behaves exactly like none, so it is
// dropped, a few per call). A held penalty is never evicted, so no flood of
// other keys can shorten it. When every held bucket is still refilling and a
// new key spends, that key is counted instead in a sketch of 4 rows of
// nextpow2(2·maxKeys) cells (8 bytes each, allocated on first use), where a
// key's refill time is the earliest among its 4 cells and a spend raises
// them to its new refill time. Collisions can only make a key look more
// spent than it is: the fallback fails closed, never open.
//
// Held buckets fill the map only while spends arrive faster than
// maxKeys/Every on average (about 110 a second for the per-account default,
// above what one small machine can hash). In simulations of floods up to
// four times that rate, no key without failures of its own was refused, and
// at most about 0.2% of keys with two (when every flood key had used its
// whole burst; none otherwise). Refusals caused by a flood stop within
// Every of it stopping.
type Limiter struct {
	now       func() time.Time
	epoch     time.Time
	every     int64 // nanoseconds
	slack     int64 // (Burst-1)·Every: how far a refill time may run ahead of now with one token left
	maxKeys   int
	seed      maphash.Seed
	mask      uint64 // sketch row width - 1
	mu        sync.Mutex
	last      int64 // latest clock reading in ns since epoch, so a clock stepping back cannot lengthen a penalty
	buckets   map[uint64]*bucket
	byRefill  refillHeap
	sketch    []int64 // sketchRows rows of refill times; nil until the first overflow
	overflows int     // spends recorded in the sketch, for tests
}

// A bucket's whole state is its refill time (GCRA's "theoretical arrival
// time"): the instant it will hold Burst tokens again. It has a token to
// spend while that instant is at most (Burst-1)·Every away.
type bucket struct {
	key    uint64 // maphash of the caller's key
	refill int64  // ns since the Limiter's epoch
	pos    int    // index in byRefill
}

const (
	sketchRows = 4
	// sweepPerCall bounds the expired buckets dropped during one call, so no
	// call pays for a whole flood expiring at once.
	sweepPerCall = 4
	// maxSpan caps Burst·Every at about 100 years so sums stay inside int64.
	maxSpan = int64(100 * 365 * 24 * time.Hour)
)

// NewLimiter returns a Limiter allowing rate per key, tracking at most
// maxKeys keys exactly (maxKeys < 1 means DefaultMaxKeys), reading the time
// from now (time.Now in production; a fake clock in tests).
func NewLimiter(rate Rate, maxKeys int, now func() time.Time) *Limiter {
	if maxKeys < 1 {
		maxKeys = DefaultMaxKeys
	}
	every := max(int64(rate.Every), 0)
	every = min(every, maxSpan)
	extra := int64(max(rate.Burst, 1) - 1)
	if every > 0 {
		extra = min(extra, maxSpan/every)
	}
	width := uint64(16)
	for width < 2*uint64(maxKeys) {
		width *= 2
	}
	return &Limiter{
		now:     now,
		epoch:   now(),
		every:   every,
		slack:   extra * every,
		maxKeys: maxKeys,
		seed:    maphash.MakeSeed(),
		mask:    width - 1,
		buckets: make(map[uint64]*bucket),
	}
}

// Allow reports whether key could spend a token now, and if not, how long
// until it can. It changes nothing a later call could observe.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	h := maphash.String(l.seed, key)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	l.sweep(now)
	return l.check(l.refillOf(h), now)
}

// Spend takes one token from key's bucket when it has one. When it has
// none it records nothing (a refused attempt does not push the penalty
// further) and reports how long until a token is back; callers answering
// HTTP should round that up to whole seconds for Retry-After.
func (l *Limiter) Spend(key string) (ok bool, retryAfter time.Duration) {
	h := maphash.String(l.seed, key)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	l.sweep(now)
	b := l.buckets[h]
	refill := l.refillOf(h)
	if ok, wait := l.check(refill, now); !ok {
		return false, wait
	}
	refill = addSat(max(refill, now), l.every)
	switch {
	case b != nil:
		b.refill = refill
		heap.Fix(&l.byRefill, b.pos)
	case refill <= now:
		// A zero Every: nothing to remember.
	case len(l.buckets) < l.maxKeys || l.byRefill[0].refill <= now:
		l.insert(h, refill, now)
	default:
		l.overflow(h, refill)
	}
	return true, 0
}

// Refund gives back one token that an earlier Spend of key took, for an
// attempt that turned out not to count (a successful login, or one that
// never reached the hash). It never fills a bucket past Burst, and does
// nothing for a key held only in the sketch.
func (l *Limiter) Refund(key string) {
	h := maphash.String(l.seed, key)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock()
	b := l.buckets[h]
	if b == nil {
		return
	}
	b.refill -= l.every
	if b.refill <= now {
		l.remove(b)
		return
	}
	heap.Fix(&l.byRefill, b.pos)
}

// Forget drops key's held bucket, so it starts again with a full burst
// (unless the sketch still counts it after a flood, until that expires).
// See the Limiter documentation for why a successful login must not call
// it on a per-account or per-address key.
func (l *Limiter) Forget(key string) {
	h := maphash.String(l.seed, key)
	l.mu.Lock()
	defer l.mu.Unlock()
	if b := l.buckets[h]; b != nil {
		l.remove(b)
	}
}

// clock reads now as ns since the epoch, never earlier than the last reading.
func (l *Limiter) clock() int64 {
	t := max(int64(l.now().Sub(l.epoch)), l.last)
	l.last = t
	return t
}

// check applies GCRA: a token is left while refill - now <= slack.
func (l *Limiter) check(refill, now int64) (bool, time.Duration) {
	if ahead := refill - now; ahead > l.slack {
		return false, time.Duration(ahead - l.slack)
	}
	return true, 0
}

// refillOf is the exact refill time of a held key, else the sketch's
// estimate (0, "full", for a key nothing hashed near).
func (l *Limiter) refillOf(h uint64) int64 {
	if b := l.buckets[h]; b != nil {
		return b.refill
	}
	if l.sketch == nil {
		return 0
	}
	est := int64(math.MaxInt64)
	for row := range uint64(sketchRows) {
		est = min(est, l.sketch[l.cell(h, row)])
	}
	return est
}

// cell derives one index per row from a single hash (Kirsch–Mitzenmacher);
// the seed is secret, so nobody can aim keys at a victim's cells.
func (l *Limiter) cell(h, row uint64) uint64 {
	return row*(l.mask+1) + (h+row*(h>>32|1))&l.mask
}

// overflow records a spend in the sketch when every held bucket is still
// refilling. Raising each cell only to the key's own new refill time (the
// "conservative update" of count-min sketches) keeps collisions from
// compounding beyond what they would be in a plain count-min sketch.
func (l *Limiter) overflow(h uint64, refill int64) {
	if l.sketch == nil {
		l.sketch = make([]int64, sketchRows*(l.mask+1))
	}
	for row := range uint64(sketchRows) {
		c := &l.sketch[l.cell(h, row)]
		*c = max(*c, refill)
	}
	l.overflows++
}

func (l *Limiter) insert(h uint64, refill, now int64) {
	if len(l.buckets) >= l.maxKeys {
		l.remove(l.byRefill[0]) // full again: forgetting it loses nothing
	}
	b := &bucket{key: h, refill: refill}
	l.buckets[h] = b
	heap.Push(&l.byRefill, b)
}

func (l *Limiter) remove(b *bucket) {
	heap.Remove(&l.byRefill, b.pos)
	delete(l.buckets, b.key)
}

// sweep drops a few buckets that are full again; they behave exactly like
// absent ones.
func (l *Limiter) sweep(now int64) {
	for range sweepPerCall {
		if len(l.byRefill) == 0 || l.byRefill[0].refill > now {
			return
		}
		l.remove(l.byRefill[0])
	}
}

// len is the number of keys held exactly.
func (l *Limiter) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// refillHeap orders buckets by refill time, soonest first.
type refillHeap []*bucket

func (q refillHeap) Len() int           { return len(q) }
func (q refillHeap) Less(i, j int) bool { return q[i].refill < q[j].refill }
func (q refillHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].pos, q[j].pos = i, j
}

func (q *refillHeap) Push(x any) {
	b := x.(*bucket)
	b.pos = len(*q)
	*q = append(*q, b)
}

func (q *refillHeap) Pop() any {
	old := *q
	b := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return b
}

// AddressKey is the limiter key for a client address. An IPv6 host is
// usually handed a whole /64 and may use any address in it, so IPv6
// addresses count by /64 prefix; IPv4, also when mapped into IPv6, counts
// per address. The zero Addr gives one shared key.
func AddressKey(addr netip.Addr) string {
	addr = addr.Unmap().WithZone("")
	if addr.Is6() {
		p, _ := addr.Prefix(64) // cannot fail: 64 bits of an IPv6 address
		return p.String()
	}
	return addr.String()
}
