package http_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"herald/auth"
	"herald/bolt"
	heraldhttp "herald/http"
)

// TestLoginTimingHidesAccounts compares the time of a login with an unknown
// e-mail and with a known e-mail and a wrong password, at the production
// hashing parameters: the medians must be within 25% of each other, or the
// answer time would tell which e-mails have accounts. The two kinds are
// interleaved so that whatever else the machine does falls on both.
func TestLoginTimingHidesAccounts(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "herald.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wide := auth.Rate{Burst: 1 << 30, Every: time.Nanosecond}
	srv := httptest.NewServer(heraldhttp.NewServer(db, auth.NewHasher(auth.DefaultParams(), 1), heraldhttp.Config{
		Logger: slog.New(slog.DiscardHandler),
		Limits: heraldhttp.Limits{LoginFailuresPerAccount: wide, LoginFailuresPerAddress: wide},
	}))
	defer srv.Close()
	post := func(body string) time.Duration {
		start := time.Now()
		res, err := http.Post(srv.URL+"/api/login", "application/json", strings.NewReader(body))
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("status %d", res.StatusCode)
		}
		return took
	}
	res, err := http.Post(srv.URL+"/api/register", "application/json", strings.NewReader(`{"email":"ada@example.com","password":"correct horse battery"}`))
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("register: %v %v", res, err)
	}
	res.Body.Close()

	// A real leak (no decoy hash for unknown e-mails) is off by a factor of
	// hundreds on every attempt; noise from a shared machine rarely is off
	// by 25% three times running. So: up to three measurements, and the
	// test fails only if all three are outside the band.
	const tries = 15
	median := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	var ratios []float64
	for range 3 {
		var known, unknown []time.Duration
		for range tries {
			known = append(known, post(`{"username":"ada@example.com","password":"wrong password"}`))
			unknown = append(unknown, post(`{"username":"nobody@example.com","password":"wrong password"}`))
		}
		k, u := median(known), median(unknown)
		ratio := float64(u) / float64(k)
		t.Logf("median login: known e-mail %v, unknown e-mail %v (ratio %.2f)", k, u, ratio)
		if ratio >= 0.75 && ratio <= 1.25 {
			return
		}
		ratios = append(ratios, ratio)
	}
	t.Errorf("an unknown e-mail answers in %.2f× the time of a wrong password, three times running; want within 25%%", ratios)
}
