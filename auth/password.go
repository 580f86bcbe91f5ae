// Package auth holds Herald's credential primitives: argon2id password
// hashing with a bound on concurrent work, and bearer-token minting and
// hashing. It knows nothing of storage or HTTP.
package auth

import (
	"container/list"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// Params are argon2id cost parameters. They are written into every encoded
// hash, so they can be raised later without invalidating stored passwords.
type Params struct {
	MemoryKiB   uint32
	Iterations  uint32
	Parallelism uint8
	SaltLen     uint32
	KeyLen      uint32
}

// DefaultParams follow OWASP's argon2id minimum: 19 MiB, 2 passes, 1 lane.
func DefaultParams() Params {
	return Params{MemoryKiB: 19 * 1024, Iterations: 2, Parallelism: 1, SaltLen: 16, KeyLen: 32}
}

// ErrMalformedHash means a stored hash cannot be parsed; it is a server-side
// fault, never the client's.
var ErrMalformedHash = errors.New("malformed password hash")

// ErrBusy means every hashing slot is taken and the queue for one is full.
// It comes back at once, so the caller can tell the client to retry later
// (503 with Retry-After) instead of holding the request open.
var ErrBusy = errors.New("password hashing queue is full")

// DefaultWaitingPerSlot sizes the queue NewHasher gives each hashing slot.
// Waiters are served in order, so the last one waits for about
// DefaultWaitingPerSlot hashes whatever the concurrency, under a second at
// DefaultParams' cost (docs/performance.md, "Logins: hashing passwords");
// and 64 logins arriving together on two cores all get in.
const DefaultWaitingPerSlot = 32

// Hasher hashes and verifies passwords. Each computation holds ~19 MiB for
// tens of milliseconds, so a semaphore bounds how many run at once: a burst
// of logins queues instead of exhausting memory on a small machine, and a
// bound on the queue turns a flood into quick ErrBusy answers instead of
// goroutines piling up behind it. Waiters are served first come, first
// served. Hash, Verify and VerifyDummy return ErrBusy when they would have
// to queue and the queue is full, and an error wrapping ctx's cause when
// ctx ends while they wait.
type Hasher struct {
	params Params
	// dummySalt feeds the decoy computation for unknown accounts.
	dummySalt []byte
	// idKey is argon2.IDKey; tests wrap it to watch computations.
	idKey func(password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte

	concurrency int
	maxWaiting  int
	mu          sync.Mutex
	computing   int
	// waiters holds one channel per queued caller, oldest first; closing it
	// hands that caller a slot. Non-empty only while every slot is taken.
	waiters list.List
}

// NewHasher returns a Hasher using p that runs at most concurrency hashes at
// once (concurrency < 1 means one per CPU) and lets
// DefaultWaitingPerSlot·concurrency more callers wait for a slot.
func NewHasher(p Params, concurrency int) *Hasher {
	return NewHasherQueue(p, concurrency, -1)
}

// NewHasherQueue is NewHasher with the number of callers allowed to wait
// for a slot set to maxWaiting: 0 refuses any caller who finds the slots
// full, and maxWaiting < 0 means DefaultWaitingPerSlot·concurrency.
func NewHasherQueue(p Params, concurrency, maxWaiting int) *Hasher {
	if concurrency < 1 {
		concurrency = runtime.NumCPU()
	}
	if maxWaiting < 0 {
		maxWaiting = DefaultWaitingPerSlot * concurrency
	}
	salt := make([]byte, p.SaltLen)
	_, _ = rand.Read(salt) // crypto/rand.Read never fails on supported platforms
	return &Hasher{
		params:      p,
		dummySalt:   salt,
		idKey:       argon2.IDKey,
		concurrency: concurrency,
		maxWaiting:  maxWaiting,
	}
}

// Load reports how many hashes are running and how many callers are
// waiting for a slot, for metrics.
func (h *Hasher) Load() (computing, waiting int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.computing, h.waiters.Len()
}

// acquire takes a hashing slot, waiting in line for one unless the line is
// full (ErrBusy) or ctx ends first.
func (h *Hasher) acquire(ctx context.Context) (release func(), err error) {
	// Without this check a request whose client has already gone could
	// still take a free slot.
	if ctx.Err() != nil {
		return nil, fmt.Errorf("waiting to hash a password: %w", context.Cause(ctx))
	}
	h.mu.Lock()
	if h.computing < h.concurrency {
		h.computing++
		h.mu.Unlock()
		return h.release, nil
	}
	if h.waiters.Len() >= h.maxWaiting {
		h.mu.Unlock()
		return nil, ErrBusy
	}
	ready := make(chan struct{})
	place := h.waiters.PushBack(ready)
	h.mu.Unlock()

	select {
	case <-ready:
		return h.release, nil
	case <-ctx.Done():
	}
	h.mu.Lock()
	select {
	case <-ready:
		// The slot arrived as ctx ended; pass it on rather than compute
		// for a client that has gone.
		h.mu.Unlock()
		h.release()
	default:
		h.waiters.Remove(place)
		h.mu.Unlock()
	}
	return nil, fmt.Errorf("waiting to hash a password: %w", context.Cause(ctx))
}

// release hands the slot straight to the oldest waiter, if any, so a
// newcomer cannot overtake the line.
func (h *Hasher) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if oldest := h.waiters.Front(); oldest != nil {
		close(h.waiters.Remove(oldest).(chan struct{}))
		return
	}
	h.computing--
}

// Hash returns the PHC-style encoding of password under a fresh random salt:
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<key>.
func (h *Hasher) Hash(ctx context.Context, password string) (string, error) {
	release, err := h.acquire(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	salt := make([]byte, h.params.SaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	p := h.params
	key := h.idKey([]byte(password), salt, p.Iterations, p.MemoryKiB, p.Parallelism, p.KeyLen)
	return encodeHash(p, salt, key), nil
}

// Verify reports whether password matches encoded, and whether encoded used
// parameters other than the Hasher's, so the caller can store a fresh hash.
func (h *Hasher) Verify(ctx context.Context, password, encoded string) (ok, stale bool, err error) {
	p, salt, want, err := decodeHash(encoded)
	if err != nil {
		return false, false, err
	}
	release, err := h.acquire(ctx)
	if err != nil {
		return false, false, err
	}
	defer release()
	got := h.idKey([]byte(password), salt, p.Iterations, p.MemoryKiB, p.Parallelism, uint32(len(want)))
	ok = subtle.ConstantTimeCompare(got, want) == 1
	stale = p.MemoryKiB != h.params.MemoryKiB || p.Iterations != h.params.Iterations ||
		p.Parallelism != h.params.Parallelism || uint32(len(want)) != h.params.KeyLen ||
		uint32(len(salt)) != h.params.SaltLen
	return ok, stale, nil
}

// VerifyDummy spends the same work as Verify and always fails. Calling it
// when no account has the given e-mail makes "no such user" and "wrong
// password" take the same time, so login timing does not reveal accounts.
func (h *Hasher) VerifyDummy(ctx context.Context, password string) error {
	release, err := h.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	p := h.params
	_ = h.idKey([]byte(password), h.dummySalt, p.Iterations, p.MemoryKiB, p.Parallelism, p.KeyLen)
	return nil
}

func encodeHash(p Params, salt, key []byte) string {
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.MemoryKiB, p.Iterations, p.Parallelism, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// Upper bounds on parameters read back from a stored hash, so a corrupted or
// planted hash cannot make one login allocate gigabytes.
const (
	maxMemoryKiB  = 1 << 20 // 1 GiB
	maxIterations = 100
)

// decodeHash parses $argon2id$v=19$m=<m>,t=<t>,p=<p>$<salt>$<key> strictly:
// plain decimal numbers, no extra text, parameters within bounds.
func decodeHash(encoded string) (p Params, salt, key []byte, err error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, nil, nil, ErrMalformedHash
	}
	if version, ok := strings.CutPrefix(parts[2], "v="); !ok || version != strconv.Itoa(argon2.Version) {
		return p, nil, nil, ErrMalformedHash
	}
	var m, t, par uint64
	fields := strings.Split(parts[3], ",")
	if len(fields) != 3 ||
		!parseParam(fields[0], "m=", maxMemoryKiB, &m) ||
		!parseParam(fields[1], "t=", maxIterations, &t) ||
		!parseParam(fields[2], "p=", 255, &par) {
		return p, nil, nil, ErrMalformedHash
	}
	p.MemoryKiB, p.Iterations, p.Parallelism = uint32(m), uint32(t), uint8(par)
	b64 := base64.RawStdEncoding.Strict()
	if salt, err = b64.DecodeString(parts[4]); err != nil || len(salt) == 0 {
		return p, nil, nil, ErrMalformedHash
	}
	if key, err = b64.DecodeString(parts[5]); err != nil || len(key) == 0 {
		return p, nil, nil, ErrMalformedHash
	}
	p.SaltLen, p.KeyLen = uint32(len(salt)), uint32(len(key))
	return p, salt, key, nil
}

// parseParam reads "<prefix><n>" with n a canonical decimal in [1, max].
func parseParam(field, prefix string, max uint64, out *uint64) bool {
	digits, ok := strings.CutPrefix(field, prefix)
	if !ok || digits == "" || digits[0] == '0' {
		return false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n > max {
		return false
	}
	*out = n
	return true
}
