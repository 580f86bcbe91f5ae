package auth_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"herald/auth"
)

// fastParams keep argon2id real but cheap; DefaultParams is exercised only
// where the production encoding itself is under test.
var fastParams = auth.Params{MemoryKiB: 64, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}

// phcPattern is the PHC string format Hash promises.
var phcPattern = regexp.MustCompile(`^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$`)

func mustHash(t testing.TB, h *auth.Hasher, password string) string {
	t.Helper()
	encoded, err := h.Hash(context.Background(), password)
	if err != nil {
		t.Fatalf("Hash(%q): %v", password, err)
	}
	return encoded
}

func TestHashVerify(t *testing.T) {
	h := auth.NewHasher(fastParams, 2)
	ctx := context.Background()
	const password = "correct horse battery staple"
	encoded := mustHash(t, h, password)

	t.Run("OK", func(t *testing.T) {
		ok, stale, err := h.Verify(ctx, password, encoded)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := ok, true; got != want {
			t.Errorf("ok = %v, want %v", got, want)
		}
		if got, want := stale, false; got != want {
			t.Errorf("stale = %v, want %v", got, want)
		}
	})

	t.Run("WrongPassword", func(t *testing.T) {
		for _, wrong := range []string{"", "correct horse battery stapl", "Correct horse battery staple", password + " ", password + "\x00"} {
			ok, _, err := h.Verify(ctx, wrong, encoded)
			if err != nil {
				t.Fatalf("Verify(%q): %v", wrong, err)
			}
			if got, want := ok, false; got != want {
				t.Errorf("Verify(%q) ok = %v, want %v", wrong, got, want)
			}
		}
	})

	t.Run("EmptyAndUnicodePasswords", func(t *testing.T) {
		for _, pw := range []string{"", "пароль-密码-🔑", strings.Repeat("x", 1024)} {
			enc := mustHash(t, h, pw)
			ok, _, err := h.Verify(ctx, pw, enc)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := ok, true; got != want {
				t.Errorf("Verify(%.20q) ok = %v, want %v", pw, got, want)
			}
		}
	})

	t.Run("SaltedHashesDiffer", func(t *testing.T) {
		other := mustHash(t, h, password)
		if other == encoded {
			t.Fatalf("two hashes of the same password are equal: %s", encoded)
		}
		if got, want := strings.Split(other, "$")[4], strings.Split(encoded, "$")[4]; got == want {
			t.Errorf("salt repeated: %s", got)
		}
		// Both still verify.
		for _, enc := range []string{encoded, other} {
			if ok, _, err := h.Verify(ctx, password, enc); err != nil || !ok {
				t.Errorf("Verify(%s) = %v, %v; want true, nil", enc, ok, err)
			}
		}
	})

	t.Run("OtherHasherVerifies", func(t *testing.T) {
		// Parameters live in the encoding, so a fresh Hasher (with its own
		// dummy salt) verifies what another one produced.
		ok, _, err := auth.NewHasher(fastParams, 1).Verify(ctx, password, encoded)
		if err != nil || !ok {
			t.Errorf("Verify = %v, %v; want true, nil", ok, err)
		}
	})
}

func TestHashFormat(t *testing.T) {
	tests := []struct {
		name   string
		params auth.Params
		prefix string
	}{
		{"Fast", fastParams, "$argon2id$v=19$m=64,t=1,p=1$"},
		{"Other", auth.Params{MemoryKiB: 128, Iterations: 3, Parallelism: 2, SaltLen: 8, KeyLen: 16}, "$argon2id$v=19$m=128,t=3,p=2$"},
		{"Default", auth.DefaultParams(), "$argon2id$v=19$m=19456,t=2,p=1$"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			encoded := mustHash(t, auth.NewHasher(tt.params, 1), "pw")
			if !strings.HasPrefix(encoded, tt.prefix) {
				t.Errorf("Hash = %q, want prefix %q", encoded, tt.prefix)
			}
			m := phcPattern.FindStringSubmatch(encoded)
			if m == nil {
				t.Fatalf("Hash = %q, does not match %s", encoded, phcPattern)
			}
			salt, err := base64.RawStdEncoding.Strict().DecodeString(m[4])
			if err != nil {
				t.Fatalf("salt %q: %v", m[4], err)
			}
			key, err := base64.RawStdEncoding.Strict().DecodeString(m[5])
			if err != nil {
				t.Fatalf("key %q: %v", m[5], err)
			}
			if got, want := len(salt), int(tt.params.SaltLen); got != want {
				t.Errorf("salt length = %d, want %d", got, want)
			}
			if got, want := len(key), int(tt.params.KeyLen); got != want {
				t.Errorf("key length = %d, want %d", got, want)
			}
		})
	}
}

func TestDefaultParams(t *testing.T) {
	if got, want := auth.DefaultParams(), (auth.Params{MemoryKiB: 19456, Iterations: 2, Parallelism: 1, SaltLen: 16, KeyLen: 32}); got != want {
		t.Errorf("DefaultParams() = %+v, want %+v", got, want)
	}
}

func TestVerifyDefaultParams(t *testing.T) {
	h := auth.NewHasher(auth.DefaultParams(), 1)
	encoded := mustHash(t, h, "hunter22")
	ok, stale, err := h.Verify(context.Background(), "hunter22", encoded)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ok, true; got != want {
		t.Errorf("ok = %v, want %v", got, want)
	}
	if got, want := stale, false; got != want {
		t.Errorf("stale = %v, want %v", got, want)
	}
}

func TestVerifyStale(t *testing.T) {
	const password = "s3cret-passw0rd"
	ctx := context.Background()
	// Each hasher differs from fastParams in exactly one parameter; a hash
	// made with fastParams must verify under it and be reported stale.
	tests := []struct {
		name  string
		other auth.Params
		stale bool
	}{
		{"Same", fastParams, false},
		{"MemoryKiB", auth.Params{MemoryKiB: 128, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}, true},
		{"Iterations", auth.Params{MemoryKiB: 64, Iterations: 2, Parallelism: 1, SaltLen: 16, KeyLen: 32}, true},
		{"Parallelism", auth.Params{MemoryKiB: 64, Iterations: 1, Parallelism: 2, SaltLen: 16, KeyLen: 32}, true},
		{"SaltLen", auth.Params{MemoryKiB: 64, Iterations: 1, Parallelism: 1, SaltLen: 32, KeyLen: 32}, true},
		{"KeyLen", auth.Params{MemoryKiB: 64, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 64}, true},
	}
	encoded := mustHash(t, auth.NewHasher(fastParams, 1), password)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := auth.NewHasher(tt.other, 1)
			ok, stale, err := h.Verify(ctx, password, encoded)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := ok, true; got != want {
				t.Errorf("ok = %v, want %v", got, want)
			}
			if got, want := stale, tt.stale; got != want {
				t.Errorf("stale = %v, want %v", got, want)
			}
			// Staleness is about the encoding, not the password.
			ok, stale, err = h.Verify(ctx, "wrong", encoded)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := ok, false; got != want {
				t.Errorf("wrong password: ok = %v, want %v", got, want)
			}
			if got, want := stale, tt.stale; got != want {
				t.Errorf("wrong password: stale = %v, want %v", got, want)
			}
			// A fresh hash under the new parameters is not stale.
			fresh := mustHash(t, h, password)
			if ok, stale, err := h.Verify(ctx, password, fresh); err != nil || !ok || stale {
				t.Errorf("Verify(fresh) = %v, %v, %v; want true, false, nil", ok, stale, err)
			}
		})
	}
}

func TestVerifyMalformed(t *testing.T) {
	const (
		salt = "c2FsdHNhbHRzYWx0c2FsdA"                   // 16 bytes, raw std base64
		key  = "a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5" // 30 bytes
	)
	valid := fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=1$%s$%s", salt, key)
	h := auth.NewHasher(fastParams, 1)
	// The valid form parses; every case below breaks exactly one thing.
	if _, _, err := h.Verify(context.Background(), "pw", valid); err != nil {
		t.Fatalf("Verify(valid): %v", err)
	}
	tests := []struct {
		name    string
		encoded string
	}{
		{"Empty", ""},
		{"Dollar", "$"},
		{"Garbage", "not a hash"},
		{"Bcrypt", "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"},
		{"Argon2i", fmt.Sprintf("$argon2i$v=19$m=64,t=1,p=1$%s$%s", salt, key)},
		{"Argon2d", fmt.Sprintf("$argon2d$v=19$m=64,t=1,p=1$%s$%s", salt, key)},
		{"AlgorithmUpperCase", fmt.Sprintf("$ARGON2ID$v=19$m=64,t=1,p=1$%s$%s", salt, key)},
		{"NoLeadingDollar", fmt.Sprintf("argon2id$v=19$m=64,t=1,p=1$%s$%s", salt, key)},
		{"LeadingGarbage", fmt.Sprintf("x$argon2id$v=19$m=64,t=1,p=1$%s$%s", salt, key)},
		{"Version16", fmt.Sprintf("$argon2id$v=16$m=64,t=1,p=1$%s$%s", salt, key)},
		{"Version20", fmt.Sprintf("$argon2id$v=20$m=64,t=1,p=1$%s$%s", salt, key)},
		{"VersionMissing", fmt.Sprintf("$argon2id$m=64,t=1,p=1$%s$%s", salt, key)},
		{"VersionEmpty", fmt.Sprintf("$argon2id$v=$m=64,t=1,p=1$%s$%s", salt, key)},
		{"VersionNotNumber", fmt.Sprintf("$argon2id$v=x$m=64,t=1,p=1$%s$%s", salt, key)},
		{"ParamsMissing", fmt.Sprintf("$argon2id$v=19$%s$%s", salt, key)},
		{"ParamsEmpty", fmt.Sprintf("$argon2id$v=19$$%s$%s", salt, key)},
		{"ParamsNoP", fmt.Sprintf("$argon2id$v=19$m=64,t=1$%s$%s", salt, key)},
		{"ParamsReordered", fmt.Sprintf("$argon2id$v=19$t=1,m=64,p=1$%s$%s", salt, key)},
		{"ParamsNotNumbers", fmt.Sprintf("$argon2id$v=19$m=a,t=b,p=c$%s$%s", salt, key)},
		{"MemoryZero", fmt.Sprintf("$argon2id$v=19$m=0,t=1,p=1$%s$%s", salt, key)},
		{"MemoryNegative", fmt.Sprintf("$argon2id$v=19$m=-1,t=1,p=1$%s$%s", salt, key)},
		{"MemoryOver1GiB", fmt.Sprintf("$argon2id$v=19$m=1048577,t=1,p=1$%s$%s", salt, key)},
		{"MemoryOverflowUint32", fmt.Sprintf("$argon2id$v=19$m=4294967296,t=1,p=1$%s$%s", salt, key)},
		{"MemoryHuge", fmt.Sprintf("$argon2id$v=19$m=4294967295,t=1,p=1$%s$%s", salt, key)},
		{"IterationsZero", fmt.Sprintf("$argon2id$v=19$m=64,t=0,p=1$%s$%s", salt, key)},
		{"IterationsOver100", fmt.Sprintf("$argon2id$v=19$m=64,t=101,p=1$%s$%s", salt, key)},
		{"IterationsHuge", fmt.Sprintf("$argon2id$v=19$m=64,t=4294967295,p=1$%s$%s", salt, key)},
		{"ParallelismZero", fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=0$%s$%s", salt, key)},
		{"ParallelismOverflowUint8", fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=256$%s$%s", salt, key)},
		{"SaltMissing", fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=1$%s", key)},
		{"SaltEmpty", fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=1$$%s", key)},
		{"SaltBadBase64", fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=1$!!!!$%s", key)},
		{"SaltPadded", fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=1$%s==$%s", salt, key)},
		{"SaltURLAlphabet", fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=1$ab-_$%s", key)},
		{"SaltBadLength", fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=1$a$%s", key)},
		{"KeyEmpty", fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=1$%s$", salt)},
		{"KeyBadBase64", fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=1$%s$*key*", salt)},
		{"KeyPadded", fmt.Sprintf("$argon2id$v=19$m=64,t=1,p=1$%s$%s=", salt, "a2V5a2V5")},
		{"TrailingPart", valid + "$"},
		{"ExtraPart", valid + "$extra"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, stale, err := h.Verify(context.Background(), "pw", tt.encoded)
			if got, want := err, auth.ErrMalformedHash; !errors.Is(got, want) {
				t.Fatalf("Verify(%q) err = %v, want %v", tt.encoded, got, want)
			}
			if ok || stale {
				t.Errorf("Verify(%q) = ok %v, stale %v alongside an error; want false, false", tt.encoded, ok, stale)
			}
		})
	}
}

func TestVerifyDummy(t *testing.T) {
	for _, p := range []auth.Params{fastParams, {MemoryKiB: 64, Iterations: 1, Parallelism: 1, SaltLen: 0, KeyLen: 16}} {
		h := auth.NewHasher(p, 1)
		for _, pw := range []string{"", "password", strings.Repeat("p", 1024)} {
			if err := h.VerifyDummy(context.Background(), pw); err != nil {
				t.Errorf("params %+v: VerifyDummy(%.10q) = %v, want nil", p, pw, err)
			}
		}
	}
}

func TestVerifyDummyDefault(t *testing.T) {
	if err := auth.NewHasher(auth.DefaultParams(), 1).VerifyDummy(context.Background(), "password"); err != nil {
		t.Errorf("VerifyDummy = %v, want nil", err)
	}
}

// TestVerifyDummyTiming: "no such account" (VerifyDummy) and "wrong
// password" (Verify) must cost the same, or login timing reveals which
// e-mails have accounts. With DefaultParams each run is a production hash,
// long enough to be measured alone. What is compared is the CPU time this
// process spent on each, not the time that passed: other processes on a
// busy machine stretch the latter by as much as the difference sought,
// never the former. The two kinds are interleaved (drift hits both alike)
// and compared by median, which ignores the odd run a collection landed in.
func TestVerifyDummyTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("60 hashes at production cost")
	}
	runs := 30
	if raceEnabled {
		runs = 8 // each hash several times slower: stay near 2 s
	}
	h := auth.NewHasher(auth.DefaultParams(), 1)
	ctx := context.Background()
	encoded := mustHash(t, h, "the real password")
	timeIt := func(f func() error) time.Duration {
		start := processCPU(t)
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return processCPU(t) - start
	}
	verifyWrong := func() error {
		ok, _, err := h.Verify(ctx, "a wrong guess", encoded)
		if ok {
			return errors.New("wrong password verified")
		}
		return err
	}
	verifyDummy := func() error { return h.VerifyDummy(ctx, "a wrong guess") }
	// A missing decoy is off by a factor of thousands every time; a shared
	// machine's noise is rarely off by 25% three times running. Fail only
	// when all three measurements are.
	var ratios []float64
	for range 3 {
		var verify, dummy []time.Duration
		for i := range runs {
			// Alternate which goes first so neither always follows the other.
			if i%2 == 0 {
				verify = append(verify, timeIt(verifyWrong))
				dummy = append(dummy, timeIt(verifyDummy))
			} else {
				dummy = append(dummy, timeIt(verifyDummy))
				verify = append(verify, timeIt(verifyWrong))
			}
		}
		mv, md := median(verify), median(dummy)
		ratio := float64(mv) / float64(md)
		t.Logf("median CPU of Verify(wrong) %v, VerifyDummy %v (ratio %.2f)", mv, md, ratio)
		if ratio >= 1/1.25 && ratio <= 1.25 {
			return
		}
		ratios = append(ratios, ratio)
	}
	t.Errorf("median Verify(wrong) / VerifyDummy = %.2f three times running, want within [0.80, 1.25]", ratios)
}

// processCPU is the CPU time, user and system, this process has spent.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
