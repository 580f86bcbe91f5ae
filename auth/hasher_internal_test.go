package auth

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// These tests reach into the semaphore: holding a slot from the test is the
// only deterministic way to know that every slot is taken, without racing a
// slow hash and asserting durations.

var smallParams = Params{MemoryKiB: 64, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}

// occupy takes n slots of h, as n running computations would, and returns a
// function that gives one back.
func occupy(t *testing.T, h *Hasher, n int) (releaseOne func()) {
	t.Helper()
	for range n {
		if computing, _ := h.Load(); computing >= h.concurrency {
			t.Fatalf("slot %d of %d already taken", computing+1, h.concurrency)
		}
		if _, err := h.acquire(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return h.release
}

// computing is the number of slots taken.
func computing(h *Hasher) int {
	n, _ := h.Load()
	return n
}

// waitOrFail bounds a wait that must end, so a broken semaphore fails the
// test instead of hanging it.
func waitOrFail(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not finish within 10s", what)
	}
}

func TestNewHasherConcurrency(t *testing.T) {
	tests := []struct {
		concurrency int
		want        int
	}{
		{0, runtime.NumCPU()},
		{-1, runtime.NumCPU()},
		{1, 1},
		{3, 3},
		{64, 64},
	}
	for _, tt := range tests {
		if got, want := NewHasher(smallParams, tt.concurrency).concurrency, tt.want; got != want {
			t.Errorf("NewHasher(p, %d): %d slots, want %d", tt.concurrency, got, want)
		}
	}
}

// hasherOps are the three operations that take a slot.
func hasherOps(h *Hasher, encoded string) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"Hash": func(ctx context.Context) error {
			_, err := h.Hash(ctx, "password")
			return err
		},
		"Verify": func(ctx context.Context) error {
			_, _, err := h.Verify(ctx, "password", encoded)
			return err
		},
		"VerifyDummy": func(ctx context.Context) error {
			return h.VerifyDummy(ctx, "password")
		},
	}
}

func TestHasherWaitsWhenSlotsFull(t *testing.T) {
	for _, n := range []int{1, 3} {
		h := NewHasher(smallParams, n)
		encoded, err := h.Hash(context.Background(), "password")
		if err != nil {
			t.Fatal(err)
		}
		occupy(t, h, n)
		for name, op := range hasherOps(h, encoded) {
			t.Run(name, func(t *testing.T) {
				t.Run("Canceled", func(t *testing.T) {
					ctx, cancel := context.WithCancel(context.Background())
					cancel()
					if got, want := op(ctx), context.Canceled; !errors.Is(got, want) {
						t.Errorf("with %d of %d slots taken: err = %v, want %v", n, n, got, want)
					}
				})
				t.Run("DeadlineExceeded", func(t *testing.T) {
					// Nothing frees a slot, so the only way out is the deadline;
					// the test asserts the error, not how long it took.
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
					defer cancel()
					if got, want := op(ctx), context.DeadlineExceeded; !errors.Is(got, want) {
						t.Errorf("err = %v, want %v", got, want)
					}
				})
				t.Run("Cause", func(t *testing.T) {
					cause := errors.New("client went away")
					ctx, cancel := context.WithCancelCause(context.Background())
					cancel(cause)
					if got, want := op(ctx), cause; !errors.Is(got, want) {
						t.Errorf("err = %v, want %v", got, want)
					}
				})
			})
		}
		if got, want := computing(h), n; got != want {
			t.Errorf("after refused waits: %d slots taken, want %d (a refused wait must not take or free one)", got, want)
		}
	}
}

// TestHasherBound shows the bound is exactly N: with N-1 slots taken one more
// computation runs, with N taken none does.
func TestHasherBound(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		h := NewHasher(smallParams, n)
		encoded, err := h.Hash(context.Background(), "password")
		if err != nil {
			t.Fatal(err)
		}
		release := occupy(t, h, n-1)
		for name, op := range hasherOps(h, encoded) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := op(ctx); err != nil {
				t.Errorf("n=%d, %d slots taken: %s = %v, want nil", n, n-1, name, err)
			}
			cancel()
			if got, want := computing(h), n-1; got != want {
				t.Errorf("n=%d: after %s, %d slots taken, want %d (slot not released)", n, name, got, want)
			}
		}
		occupy(t, h, 1)
		for name, op := range hasherOps(h, encoded) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if got, want := op(ctx), context.Canceled; !errors.Is(got, want) {
				t.Errorf("n=%d, all slots taken: %s = %v, want %v", n, name, got, want)
			}
		}
		release()
	}
}

// TestHasherWaiterProceeds shows a waiting computation is queued, not
// refused: it finishes once a slot is given back.
func TestHasherWaiterProceeds(t *testing.T) {
	h := NewHasher(smallParams, 1)
	releaseOne := occupy(t, h, 1)
	done := make(chan struct{})
	var encoded string
	var err error
	go func() {
		defer close(done)
		encoded, err = h.Hash(context.Background(), "queued")
	}()
	releaseOne()
	waitOrFail(t, done, "queued Hash")
	if err != nil {
		t.Fatal(err)
	}
	if ok, _, err := h.Verify(context.Background(), "queued", encoded); err != nil || !ok {
		t.Errorf("Verify(queued) = %v, %v; want true, nil", ok, err)
	}
	if got, want := computing(h), 0; got != want {
		t.Errorf("%d slots taken after all work finished, want %d", got, want)
	}
}

// TestHasherConcurrentUse runs many more callers than slots (under -race
// this also checks Hasher is safe for concurrent use); every call succeeds
// and every slot is given back.
func TestHasherConcurrentUse(t *testing.T) {
	const n, callers = 2, 16
	h := NewHasher(smallParams, n)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 3*callers)
	for i := range callers {
		wg.Go(func() {
			pw := string(rune('a' + i))
			enc, err := h.Hash(ctx, pw)
			if err != nil {
				errs <- err
				return
			}
			ok, _, err := h.Verify(ctx, pw, enc)
			if err == nil && !ok {
				err = errors.New("Verify of own hash failed")
			}
			if err != nil {
				errs <- err
			}
			if err := h.VerifyDummy(ctx, pw); err != nil {
				errs <- err
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	waitOrFail(t, done, "concurrent callers")
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got, want := computing(h), 0; got != want {
		t.Errorf("%d slots taken after all work finished, want %d", got, want)
	}
}

// TestVerifyMalformedDoesNotWait: a hash that cannot be parsed is refused
// before waiting for a slot, so it costs nothing and reports the real fault.
func TestVerifyMalformedDoesNotWait(t *testing.T) {
	h := NewHasher(smallParams, 1)
	occupy(t, h, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := h.Verify(ctx, "pw", "$argon2id$v=19$m=2000000,t=1,p=1$c2FsdA$a2V5")
	if got, want := err, ErrMalformedHash; !errors.Is(got, want) {
		t.Errorf("err = %v, want %v", got, want)
	}
}

func TestDecodeHashRoundTrip(t *testing.T) {
	tests := []Params{
		smallParams,
		DefaultParams(),
		{MemoryKiB: maxMemoryKiB, Iterations: maxIterations, Parallelism: 255, SaltLen: 1, KeyLen: 1},
		{MemoryKiB: 1, Iterations: 1, Parallelism: 1, SaltLen: 64, KeyLen: 128},
	}
	for _, want := range tests {
		salt := make([]byte, want.SaltLen)
		key := make([]byte, want.KeyLen)
		for i := range salt {
			salt[i] = byte(i)
		}
		for i := range key {
			key[i] = byte(255 - i)
		}
		p, gotSalt, gotKey, err := decodeHash(encodeHash(want, salt, key))
		if err != nil {
			t.Fatalf("decodeHash(encodeHash(%+v)): %v", want, err)
		}
		if got := p; got != want {
			t.Errorf("params = %+v, want %+v", got, want)
		}
		if got, want := string(gotSalt), string(salt); got != want {
			t.Errorf("salt = %x, want %x", got, want)
		}
		if got, want := string(gotKey), string(key); got != want {
			t.Errorf("key = %x, want %x", got, want)
		}
	}
}

func TestNewHasherQueue(t *testing.T) {
	tests := []struct {
		concurrency, maxWaiting         int
		wantConcurrency, wantMaxWaiting int
	}{
		{2, -1, 2, 2 * DefaultWaitingPerSlot},
		{0, -1, runtime.NumCPU(), runtime.NumCPU() * DefaultWaitingPerSlot},
		{2, 0, 2, 0},
		{2, 10, 2, 10},
		{1, 1000, 1, 1000},
	}
	for _, tt := range tests {
		h := NewHasherQueue(smallParams, tt.concurrency, tt.maxWaiting)
		if got, want := h.concurrency, tt.wantConcurrency; got != want {
			t.Errorf("NewHasherQueue(p, %d, %d): concurrency %d, want %d", tt.concurrency, tt.maxWaiting, got, want)
		}
		if got, want := h.maxWaiting, tt.wantMaxWaiting; got != want {
			t.Errorf("NewHasherQueue(p, %d, %d): maxWaiting %d, want %d", tt.concurrency, tt.maxWaiting, got, want)
		}
	}
	if got, want := NewHasher(smallParams, 3).maxWaiting, 3*DefaultWaitingPerSlot; got != want {
		t.Errorf("NewHasher(p, 3): maxWaiting %d, want %d", got, want)
	}
}

// waitLoad polls until h reports the given load. Goroutines that queue give
// no other signal; the 10-second bound turns a wrong count into a failure.
func waitLoad(t *testing.T, h *Hasher, wantComputing, wantWaiting int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, w := h.Load()
		if c == wantComputing && w == wantWaiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Load() = %d, %d; want %d, %d", c, w, wantComputing, wantWaiting)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHasherNoQueue: with no room to wait, a caller who finds the slots
// full is refused at once, whatever its context, and takes nothing.
func TestHasherNoQueue(t *testing.T) {
	h := NewHasherQueue(smallParams, 2, 0)
	encoded, err := h.Hash(context.Background(), "password")
	if err != nil {
		t.Fatal(err)
	}
	occupy(t, h, 2)
	for name, op := range hasherOps(h, encoded) {
		if got, want := op(context.Background()), ErrBusy; !errors.Is(got, want) {
			t.Errorf("%s with every slot taken: err = %v, want %v", name, got, want)
		}
	}
	if c, w := h.Load(); c != 2 || w != 0 {
		t.Errorf("Load() = %d, %d after refusals; want 2, 0", c, w)
	}
}

// countingIDKey wraps argon2 so a test sees how many computations run at
// once; each waits at gate (if not nil) before computing.
type countingIDKey struct {
	inFlight, maxInFlight, calls atomic.Int32
	entered                      chan string
	gate                         chan struct{}
	next                         func(password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte
}

func watch(h *Hasher, gate chan struct{}) *countingIDKey {
	c := &countingIDKey{entered: make(chan string, 1000), gate: gate, next: h.idKey}
	h.idKey = c.idKey
	return c
}

func (c *countingIDKey) idKey(password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte {
	n := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	c.calls.Add(1)
	for m := c.maxInFlight.Load(); n > m && !c.maxInFlight.CompareAndSwap(m, n); m = c.maxInFlight.Load() {
	}
	c.entered <- string(password)
	if c.gate != nil {
		<-c.gate
	}
	return c.next(password, salt, time, memory, threads, keyLen)
}

// TestHasherOverflow runs 200 concurrent Verify calls through 2 slots and a
// queue of 10. Every call either verifies or gets ErrBusy, none hangs, and
// no more than 2 computations ever run at once.
func TestHasherOverflow(t *testing.T) {
	const concurrency, queue, callers = 2, 10, 200
	type result struct {
		ok  bool
		err error
	}
	run := func(t *testing.T, h *Hasher, encoded string) <-chan result {
		results := make(chan result, callers)
		for i := range callers {
			go func() {
				// Odd callers give the wrong password: a failed match is
				// an answer like any other, not an error.
				pw := "password"
				if i%2 == 1 {
					pw = "wrong"
				}
				ok, _, err := h.Verify(context.Background(), pw, encoded)
				if err == nil && ok != (i%2 == 0) {
					err = errors.New("Verify gave the wrong answer")
				}
				results <- result{ok, err}
			}()
		}
		return results
	}
	collect := func(t *testing.T, results <-chan result, n int) (busy int) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for range n {
			select {
			case r := <-results:
				switch {
				case errors.Is(r.err, ErrBusy):
					busy++
				case r.err != nil:
					t.Error(r.err)
				}
			case <-timeout:
				t.Fatalf("callers still running after 10s")
			}
		}
		return busy
	}

	t.Run("Gated", func(t *testing.T) {
		// The first two computations hold their slots until every other
		// caller has been queued or refused, so the overflow is exact.
		h := NewHasherQueue(smallParams, concurrency, queue)
		encoded, err := h.Hash(context.Background(), "password")
		if err != nil {
			t.Fatal(err)
		}
		gate := make(chan struct{})
		c := watch(h, gate)
		results := run(t, h, encoded)
		for range concurrency {
			<-c.entered
		}
		// Callers in slots or in the queue cannot answer before the gate
		// opens, so the first answers are exactly the refused ones.
		if got, want := collect(t, results, callers-concurrency-queue), callers-concurrency-queue; got != want {
			t.Errorf("%d callers got ErrBusy, want %d", got, want)
		}
		if c, w := h.Load(); c != concurrency || w != queue {
			t.Errorf("Load() = %d, %d with the gate shut; want %d, %d", c, w, concurrency, queue)
		}
		close(gate)
		if got, want := collect(t, results, concurrency+queue), 0; got != want {
			t.Errorf("%d queued callers got ErrBusy, want %d", got, want)
		}
		if got, want := int(c.calls.Load()), concurrency+queue; got != want {
			t.Errorf("%d computations, want %d", got, want)
		}
		if got, want := int(c.maxInFlight.Load()), concurrency; got != want {
			t.Errorf("at most %d computations at once, want %d", got, want)
		}
		if c, w := h.Load(); c != 0 || w != 0 {
			t.Errorf("Load() = %d, %d after all callers; want 0, 0", c, w)
		}
	})

	t.Run("FreeRunning", func(t *testing.T) {
		// How many are refused now depends on scheduling; what may not
		// vary is the bound, the accounting and that everyone answers.
		h := NewHasherQueue(smallParams, concurrency, queue)
		encoded, err := h.Hash(context.Background(), "password")
		if err != nil {
			t.Fatal(err)
		}
		c := watch(h, nil)
		busy := collect(t, run(t, h, encoded), callers)
		if got, want := int(c.calls.Load()), callers-busy; got != want {
			t.Errorf("%d computations for %d admitted callers", got, want)
		}
		if got, want := int(c.maxInFlight.Load()), concurrency; got > want {
			t.Errorf("%d computations at once, want at most %d", got, want)
		}
		if c, w := h.Load(); c != 0 || w != 0 {
			t.Errorf("Load() = %d, %d after all callers; want 0, 0", c, w)
		}
	})
}

// TestHasherCancelFreesPlace: a waiter whose context ends leaves the queue
// at once, its place goes to the next caller, and the rest are served in
// the order they arrived.
func TestHasherCancelFreesPlace(t *testing.T) {
	h := NewHasherQueue(smallParams, 1, 2)
	c := watch(h, nil)
	releaseOne := occupy(t, h, 1)

	type answer struct {
		name string
		err  error
	}
	answers := make(chan answer, 3)
	start := func(ctx context.Context, name string) {
		go func() {
			_, err := h.Hash(ctx, name)
			answers <- answer{name, err}
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start(ctx, "first")
	waitLoad(t, h, 1, 1)
	start(context.Background(), "second")
	waitLoad(t, h, 1, 2)

	if _, err := h.Hash(context.Background(), "refused"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Hash with a full queue: err = %v, want %v", err, ErrBusy)
	}
	cancel()
	select {
	case a := <-answers:
		if a.name != "first" || !errors.Is(a.err, context.Canceled) {
			t.Fatalf("answer %s: %v; want first: %v", a.name, a.err, context.Canceled)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("canceled waiter still waiting after 10s")
	}
	waitLoad(t, h, 1, 1)
	start(context.Background(), "third") // takes the canceled waiter's place
	waitLoad(t, h, 1, 2)

	releaseOne()
	for _, want := range []string{"second", "third"} {
		select {
		case got := <-c.entered:
			if got != want {
				t.Errorf("computed %q, want %q next", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s not computed after 10s", want)
		}
	}
	for range 2 {
		if a := <-answers; a.err != nil {
			t.Errorf("%s: %v", a.name, a.err)
		}
	}
	if c, w := h.Load(); c != 0 || w != 0 {
		t.Errorf("Load() = %d, %d at the end; want 0, 0", c, w)
	}
}
