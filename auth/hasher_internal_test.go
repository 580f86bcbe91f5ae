package auth

import (
	"context"
	"errors"
	"runtime"
	"sync"
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
		select {
		case h.slots <- struct{}{}:
		default:
			t.Fatalf("slot %d of %d already taken", len(h.slots)+1, cap(h.slots))
		}
	}
	return func() { <-h.slots }
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
		if got, want := cap(NewHasher(smallParams, tt.concurrency).slots), tt.want; got != want {
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
		if got, want := len(h.slots), n; got != want {
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
			if got, want := len(h.slots), n-1; got != want {
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
	if got, want := len(h.slots), 0; got != want {
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
	if got, want := len(h.slots), 0; got != want {
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
