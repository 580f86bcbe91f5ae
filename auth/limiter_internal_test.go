package auth

import (
	"fmt"
	"math"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock is the Limiter's clock in tests: it moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// limiterStep is one call in a scripted sequence: advance the clock, call
// op on key, expect ok and retryAfter (Refund and Forget expect nothing).
type limiterStep struct {
	advance time.Duration
	op      string
	key     string
	ok      bool
	retry   time.Duration
}

func spends(key string, n int) []limiterStep {
	steps := make([]limiterStep, n)
	for i := range steps {
		steps[i] = limiterStep{op: "spend", key: key, ok: true}
	}
	return steps
}

func script(parts ...any) []limiterStep {
	var steps []limiterStep
	for _, p := range parts {
		switch p := p.(type) {
		case limiterStep:
			steps = append(steps, p)
		case []limiterStep:
			steps = append(steps, p...)
		}
	}
	return steps
}

func runSteps(t *testing.T, l *Limiter, clock *fakeClock, steps []limiterStep) {
	t.Helper()
	for i, s := range steps {
		clock.Advance(s.advance)
		var ok bool
		var retry time.Duration
		switch s.op {
		case "spend":
			ok, retry = l.Spend(s.key)
		case "allow":
			ok, retry = l.Allow(s.key)
		case "refund":
			l.Refund(s.key)
			continue
		case "forget":
			l.Forget(s.key)
			continue
		default:
			t.Fatalf("step %d: unknown op %q", i, s.op)
		}
		if got, want := ok, s.ok; got != want {
			t.Errorf("step %d (+%v %s %q): ok = %v, want %v", i, s.advance, s.op, s.key, got, want)
		}
		if got, want := retry, s.retry; got != want {
			t.Errorf("step %d (+%v %s %q): retryAfter = %v, want %v", i, s.advance, s.op, s.key, got, want)
		}
	}
}

func TestLimiterPolicy(t *testing.T) {
	three := Rate{Burst: 3, Every: 10 * time.Second}
	tests := []struct {
		name  string
		rate  Rate
		steps []limiterStep
	}{
		{"BurstThenRetryAfter", three, script(
			spends("a", 3),
			limiterStep{op: "spend", key: "a", retry: 10 * time.Second},
			limiterStep{advance: 4 * time.Second, op: "allow", key: "a", retry: 6 * time.Second},
			limiterStep{advance: 6 * time.Second, op: "spend", key: "a", ok: true},
			limiterStep{op: "spend", key: "a", retry: 10 * time.Second},
		)},
		{"FullRefill", three, script(
			spends("a", 3),
			limiterStep{advance: 30 * time.Second, op: "allow", key: "a", ok: true},
			spends("a", 3),
			limiterStep{op: "spend", key: "a", retry: 10 * time.Second},
		)},
		{"NoRefillBeyondBurst", three, script(
			spends("a", 3),
			limiterStep{advance: time.Hour, op: "allow", key: "a", ok: true},
			spends("a", 3),
			limiterStep{op: "allow", key: "a", retry: 10 * time.Second},
		)},
		{"PartialRefill", three, script(
			spends("a", 3),
			limiterStep{advance: 25 * time.Second, op: "spend", key: "a", ok: true},
			limiterStep{op: "spend", key: "a", ok: true},
			limiterStep{op: "spend", key: "a", retry: 5 * time.Second},
		)},
		{"AllowDoesNotSpend", three, script(
			limiterStep{op: "allow", key: "a", ok: true},
			limiterStep{op: "allow", key: "a", ok: true},
			limiterStep{op: "allow", key: "a", ok: true},
			limiterStep{op: "allow", key: "a", ok: true},
			spends("a", 3),
			limiterStep{op: "allow", key: "a", retry: 10 * time.Second},
		)},
		{"RefusedSpendRecordsNothing", three, script(
			spends("a", 3),
			limiterStep{op: "spend", key: "a", retry: 10 * time.Second},
			limiterStep{advance: 5 * time.Second, op: "spend", key: "a", retry: 5 * time.Second},
			limiterStep{advance: 4 * time.Second, op: "spend", key: "a", retry: time.Second},
			limiterStep{advance: time.Second, op: "spend", key: "a", ok: true},
		)},
		{"KeysAreIndependent", three, script(
			spends("a", 3),
			limiterStep{op: "spend", key: "a", retry: 10 * time.Second},
			spends("b", 3),
			limiterStep{op: "allow", key: "c", ok: true},
		)},
		{"RefundGivesBackOne", three, script(
			spends("a", 3),
			limiterStep{op: "refund", key: "a"},
			limiterStep{op: "spend", key: "a", ok: true},
			limiterStep{op: "spend", key: "a", retry: 10 * time.Second},
		)},
		{"RefundKeepsOtherFailures", three, script(
			// Two failures from elsewhere, then a reserved attempt that
			// succeeds: the two failures still count.
			spends("a", 2),
			spends("a", 1),
			limiterStep{op: "refund", key: "a"},
			spends("a", 1),
			limiterStep{op: "spend", key: "a", retry: 10 * time.Second},
		)},
		{"RefundNeverOverfills", three, script(
			limiterStep{op: "refund", key: "a"},
			limiterStep{op: "refund", key: "a"},
			spends("a", 1),
			limiterStep{op: "refund", key: "a"},
			limiterStep{op: "refund", key: "a"},
			spends("a", 3),
			limiterStep{op: "spend", key: "a", retry: 10 * time.Second},
		)},
		{"Forget", three, script(
			spends("a", 3),
			spends("b", 3),
			limiterStep{op: "forget", key: "a"},
			spends("a", 3),
			limiterStep{op: "spend", key: "b", retry: 10 * time.Second},
		)},
		{"BurstOne", Rate{Burst: 1, Every: time.Minute}, script(
			spends("a", 1),
			limiterStep{op: "spend", key: "a", retry: time.Minute},
			limiterStep{advance: 59 * time.Second, op: "allow", key: "a", retry: time.Second},
			limiterStep{advance: time.Second, op: "spend", key: "a", ok: true},
		)},
		{"BurstBelowOneIsOne", Rate{Burst: -3, Every: time.Minute}, script(
			spends("a", 1),
			limiterStep{op: "spend", key: "a", retry: time.Minute},
		)},
		{"ZeroRateNeverRefuses", Rate{}, script(
			spends("a", 1000),
		)},
		{"NegativeEveryNeverRefuses", Rate{Burst: 2, Every: -time.Second}, script(
			spends("a", 100),
		)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			l := NewLimiter(tt.rate, 100, clock.Now)
			runSteps(t, l, clock, tt.steps)
		})
	}
}

func TestLimiterDefaults(t *testing.T) {
	tests := []struct {
		name        string
		rate        Rate
		want        Rate
		maxHourWant int
	}{
		{"LoginFailuresPerAccount", LoginFailuresPerAccount(), Rate{10, 5 * time.Minute}, 22},
		{"LoginFailuresPerAddress", LoginFailuresPerAddress(), Rate{20, time.Minute}, 80},
		{"RegistrationsPerAddress", RegistrationsPerAddress(), Rate{20, 45 * time.Second}, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := tt.rate, tt.want; got != want {
				t.Errorf("%s() = %+v, want %+v", tt.name, got, want)
			}
			// The figure the doc comments promise.
			if got, want := tt.rate.Burst+int(time.Hour/tt.rate.Every), tt.maxHourWant; got != want {
				t.Errorf("Burst + hour/Every = %d, want %d", got, want)
			}
		})
	}
}

// TestLoginFailuresPerAccount: two mistypes never block, the eleventh
// guess in a row is refused, and a blocked owner waits 5 minutes.
func TestLoginFailuresPerAccount(t *testing.T) {
	clock := newFakeClock()
	l := NewLimiter(LoginFailuresPerAccount(), 0, clock.Now)
	runSteps(t, l, clock, script(
		spends("ada@example.com", 2),
		limiterStep{op: "allow", key: "ada@example.com", ok: true},
		spends("ada@example.com", 8),
		limiterStep{op: "allow", key: "ada@example.com", retry: 5 * time.Minute},
		limiterStep{op: "spend", key: "ada@example.com", retry: 5 * time.Minute},
		limiterStep{advance: 5 * time.Minute, op: "spend", key: "ada@example.com", ok: true},
		limiterStep{op: "allow", key: "ada@example.com", retry: 5 * time.Minute},
	))
}

// TestLimiterFullSpeed simulates a client retrying as fast as it likes for
// hours and counts what passes in every one-hour window.
func TestLimiterFullSpeed(t *testing.T) {
	tests := []struct {
		name      string
		rate      Rate
		step      time.Duration
		span      time.Duration
		perHour   int // at most this many in any hour, and reached
		totalWant int
	}{
		{"Registrations", RegistrationsPerAddress(), 100 * time.Millisecond, 3 * time.Hour, 100, 20 + 3*80},
		{"AccountGuesser", LoginFailuresPerAccount(), time.Second, 24 * time.Hour, 22, 10 + 24*12},
		{"AddressGuesser", LoginFailuresPerAddress(), time.Second, 3 * time.Hour, 80, 20 + 3*60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			l := NewLimiter(tt.rate, 10, clock.Now)
			var passed []time.Duration
			for at := time.Duration(0); at <= tt.span; at += tt.step {
				if ok, _ := l.Spend("203.0.113.9"); ok {
					passed = append(passed, at)
				}
				clock.Advance(tt.step)
			}
			most, first := 0, 0
			for last := range passed {
				for passed[last]-passed[first] > time.Hour {
					first++
				}
				most = max(most, last-first+1)
			}
			if got, want := most, tt.perHour; got != want {
				t.Errorf("at most %d passed in one hour, want %d", got, want)
			}
			if got, want := len(passed), tt.totalWant; got != want {
				t.Errorf("%d passed in %v, want %d", got, tt.span, want)
			}
		})
	}
}

// TestLimiterBoundedMemory floods a Limiter with 100,000 distinct keys at
// full speed; it never holds more than maxKeys of them.
func TestLimiterBoundedMemory(t *testing.T) {
	for _, maxKeys := range []int{1, 1000, DefaultMaxKeys} {
		t.Run(fmt.Sprint(maxKeys), func(t *testing.T) {
			clock := newFakeClock()
			l := NewLimiter(LoginFailuresPerAccount(), maxKeys, clock.Now)
			most := 0
			for i := range 100_000 {
				clock.Advance(time.Millisecond)
				l.Spend(fmt.Sprintf("user%d@example.com", i))
				most = max(most, l.len())
			}
			if got, want := most, maxKeys; got != want {
				t.Errorf("held up to %d keys, want at most (and reaching) %d", got, want)
			}
			if got, want := len(l.byRefill), l.len(); got != want {
				t.Errorf("heap holds %d buckets, map %d", got, want)
			}
		})
	}
}

// TestLimiterFloodKeepsPenalty: flooding the Limiter with other keys cannot
// reset or shorten a held penalty, whatever the flood's keys look like:
// held penalties are never evicted, and the flood spills into the sketch.
func TestLimiterFloodKeepsPenalty(t *testing.T) {
	rate := LoginFailuresPerAccount()
	tests := []struct{ flood, spendsEach int }{
		{100_000, 1},
		{20_000, rate.Burst / 2},
		{20_000, rate.Burst}, // every flood key blocked, like the target
	}
	for _, tt := range tests {
		flood, spendsEach := tt.flood, tt.spendsEach
		t.Run(fmt.Sprintf("%dKeys%dSpendsEach", flood, spendsEach), func(t *testing.T) {
			const maxKeys = 1000
			clock := newFakeClock()
			l := NewLimiter(rate, maxKeys, clock.Now)
			const target = "victim@example.com"
			for range rate.Burst {
				l.Spend(target)
			}
			const step = time.Millisecond // the whole flood fits in 100 s
			for i := range flood {
				clock.Advance(step)
				for range spendsEach {
					l.Spend(fmt.Sprintf("flood%d@example.com", i))
				}
			}
			if l.overflows == 0 {
				t.Fatal("the flood never overflowed into the sketch")
			}
			if got, want := l.len(), maxKeys; got != want {
				t.Errorf("held %d keys, want %d", got, want)
			}
			ok, wait := l.Allow(target)
			if got, want := ok, false; got != want {
				t.Errorf("target allowed after a flood of %d keys", flood)
			}
			if got, want := wait, rate.Every-time.Duration(flood)*step; got != want {
				t.Errorf("retryAfter = %v, want %v (exactly what it was, less the time passed)", got, want)
			}
		})
	}
}

// TestLimiterOverflowFailsClosed: a key first seen while every held bucket
// carries a penalty is counted in the sketch, at least as strictly as if it
// were held.
func TestLimiterOverflowFailsClosed(t *testing.T) {
	clock := newFakeClock()
	rate := Rate{Burst: 3, Every: time.Minute}
	l := NewLimiter(rate, 10, clock.Now)
	for i := range 10 {
		l.Spend(fmt.Sprint("held", i))
	}
	runSteps(t, l, clock, script(
		spends("newcomer", 3),
		limiterStep{op: "spend", key: "newcomer", retry: time.Minute},
		// Refund cannot reach into the sketch: the refusal stands.
		limiterStep{op: "refund", key: "newcomer"},
		limiterStep{op: "allow", key: "newcomer", retry: time.Minute},
		limiterStep{op: "forget", key: "newcomer"},
		limiterStep{advance: 30 * time.Second, op: "allow", key: "newcomer", retry: 30 * time.Second},
	))
	if got, want := l.len(), 10; got != want {
		t.Errorf("held %d keys, want %d", got, want)
	}
	if l.overflows == 0 {
		t.Error("newcomer was not counted in the sketch")
	}
	// Once the held penalties expire, newcomers are held again, starting
	// from what the sketch knew.
	runSteps(t, l, clock, script(
		limiterStep{advance: 30 * time.Second, op: "spend", key: "newcomer", ok: true},
		limiterStep{op: "spend", key: "newcomer", retry: time.Minute},
	))
	clock.Advance(3 * time.Minute)
	for range 20 {
		l.Allow("sweep")
	}
	if got, want := l.len(), 0; got != want {
		t.Errorf("held %d keys after every penalty expired, want %d", got, want)
	}
}

// TestLimiterFloodSparesBystanders: a flood of distinct keys at twice the
// rate the held buckets absorb (maxKeys/Every), for an hour, refuses no key
// that did not take part, and almost none that failed twice itself. The
// sketch is random (its seed is), so the latter is a rate: about 0.03% in
// simulations when flood keys use their whole burst, 0 otherwise.
func TestLimiterFloodSparesBystanders(t *testing.T) {
	for _, spendsEach := range []int{1, 3, 10} {
		t.Run(fmt.Sprintf("%dSpendsEach", spendsEach), func(t *testing.T) {
			const maxKeys, bystanders = 1000, 1000
			rate := LoginFailuresPerAccount()
			clock := newFakeClock()
			l := NewLimiter(rate, maxKeys, clock.Now)
			step := time.Duration(spendsEach) * rate.Every / (2 * maxKeys)
			for i := 0; time.Duration(i)*step < time.Hour; i++ {
				clock.Advance(step)
				for range spendsEach {
					l.Spend(fmt.Sprintf("flood%d@example.com", i))
				}
			}
			if l.overflows == 0 {
				t.Fatal("the flood never overflowed into the sketch")
			}
			refused := 0
			for i := range bystanders {
				if ok, wait := l.Allow(fmt.Sprintf("untouched%d@example.com", i)); !ok {
					t.Fatalf("Allow(untouched%d) = false, %v during the flood", i, wait)
				}
				key := fmt.Sprintf("bystander%d@example.com", i)
				l.Spend(key)
				l.Spend(key)
				if ok, _ := l.Allow(key); !ok {
					refused++
				}
			}
			if most := bystanders / 100; refused > most {
				t.Errorf("%d of %d keys with two failures refused, want at most %d", refused, bystanders, most)
			}
		})
	}
}

// TestLimiterSweep: buckets that are full again leave the map as calls
// arrive, a few per call, without a full scan.
func TestLimiterSweep(t *testing.T) {
	clock := newFakeClock()
	rate := Rate{Burst: 3, Every: time.Second}
	l := NewLimiter(rate, 1000, clock.Now)
	for i := range 1000 {
		l.Spend(fmt.Sprint(i))
		l.Spend(fmt.Sprint(i))
	}
	if got, want := l.len(), 1000; got != want {
		t.Fatalf("held %d keys, want %d", got, want)
	}
	clock.Advance(time.Second) // one token back of two: still held
	l.Allow("x")
	if got, want := l.len(), 1000; got != want {
		t.Errorf("held %d keys before any refilled, want %d", got, want)
	}
	clock.Advance(time.Second)
	l.Allow("x")
	if got, want := l.len(), 1000-sweepPerCall; got != want {
		t.Errorf("held %d keys after one call, want %d", got, want)
	}
	for range 1000 / sweepPerCall {
		l.Allow("x")
	}
	if got, want := l.len(), 0; got != want {
		t.Errorf("held %d keys after enough calls, want %d", got, want)
	}
}

// TestLimiterClock: a clock that steps back neither lengthens a penalty nor
// refills; one that jumps centuries ahead keeps working.
func TestLimiterClock(t *testing.T) {
	clock := newFakeClock()
	rate := Rate{Burst: 2, Every: time.Minute}
	l := NewLimiter(rate, 10, clock.Now)
	runSteps(t, l, clock, script(
		spends("a", 2),
		limiterStep{advance: 30 * time.Second, op: "allow", key: "a", retry: 30 * time.Second},
		limiterStep{advance: -time.Hour, op: "allow", key: "a", retry: 30 * time.Second},
		limiterStep{advance: time.Hour + 30*time.Second, op: "spend", key: "a", ok: true},
		limiterStep{advance: 200 * 365 * 24 * time.Hour, op: "spend", key: "a", ok: true},
		limiterStep{op: "spend", key: "a", ok: true},
		limiterStep{op: "spend", key: "a", retry: time.Minute},
	))
}

// TestLimiterExtremeRates: rates whose products overflow int64 are capped,
// not wrapped around into "never refuse".
func TestLimiterExtremeRates(t *testing.T) {
	tests := []Rate{
		{Burst: math.MaxInt, Every: time.Duration(math.MaxInt64)},
		{Burst: 1, Every: time.Duration(math.MaxInt64)},
		{Burst: math.MaxInt, Every: time.Nanosecond},
		{Burst: 3, Every: 200 * 365 * 24 * time.Hour},
	}
	for _, rate := range tests {
		clock := newFakeClock()
		l := NewLimiter(rate, 10, clock.Now)
		for i := range 5 {
			ok, wait := l.Spend("a")
			if wait < 0 || ok != (wait == 0) {
				t.Errorf("%+v: spend %d = %v, %v", rate, i, ok, wait)
			}
			clock.Advance(time.Duration(math.MaxInt64))
		}
	}
	clock := newFakeClock()
	l := NewLimiter(Rate{Burst: 1, Every: time.Duration(math.MaxInt64)}, 10, clock.Now)
	if ok, _ := l.Spend("a"); !ok {
		t.Fatal("first spend refused")
	}
	if ok, wait := l.Spend("a"); ok || wait <= 0 {
		t.Errorf("second spend = %v, %v; want a refusal", ok, wait)
	}
}

// TestLimiterConcurrent: many goroutines spending on one key at one instant
// get exactly Burst tokens between them, while others flood distinct keys
// through eviction (under -race this also checks the locking).
func TestLimiterConcurrent(t *testing.T) {
	const goroutines, each, maxKeys = 8, 500, 64
	clock := newFakeClock()
	rate := Rate{Burst: 10, Every: time.Hour}
	l := NewLimiter(rate, maxKeys, clock.Now)
	var passed atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if ok, _ := l.Spend("shared"); ok {
					passed.Add(1)
				}
				l.Allow(fmt.Sprint(g, i))
				l.Spend(fmt.Sprint(g, i))
				l.Refund(fmt.Sprint(g, i-1))
				l.Forget(fmt.Sprint(g, i-2))
			}
		})
	}
	wg.Wait()
	if got, want := int(passed.Load()), rate.Burst; got != want {
		t.Errorf("%d spends on one key passed, want %d", got, want)
	}
	if got := l.len(); got > maxKeys {
		t.Errorf("held %d keys, want at most %d", got, maxKeys)
	}
}

func TestAddressKey(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		{"203.0.113.9", "203.0.113.9"},
		{"::ffff:203.0.113.9", "203.0.113.9"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"fe80::1%eth0", "fe80::/64"},
		{"::1", "::/64"},
	}
	for _, tt := range tests {
		if got, want := AddressKey(netip.MustParseAddr(tt.addr)), tt.want; got != want {
			t.Errorf("AddressKey(%s) = %q, want %q", tt.addr, got, want)
		}
	}
	if got, want := AddressKey(netip.Addr{}), AddressKey(netip.Addr{}); got != want {
		t.Errorf("AddressKey(zero) not stable: %q, %q", got, want)
	}
}
