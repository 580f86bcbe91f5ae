package model

import (
	"testing"
	"time"
)

func TestFingerprint(t *testing.T) {
	within := func(s int64, ns int64) *time.Time { tm := time.Unix(s, ns).UTC(); return &tm }
	at := func(s int64) *time.Time { return within(s, 0) }
	base := SearchQuery{Terms: Terms("hello world"), OwnerEmail: "ada@example.com", Since: at(10), Until: at(20)}
	same := []SearchQuery{
		{Terms: Terms("WORLD hello"), OwnerEmail: " ADA@example.com ", Since: at(10), Until: at(20)},
		{Terms: Terms("hello world"), OwnerEmail: "ada@example.com", Since: at(10), Until: at(20), BeforeID: 99, Limit: 3},
	}
	// Two bounds within one microsecond select the same messages (the
	// store keeps microseconds and rounds a bound up), so they share a
	// cursor.
	if a, b := (SearchQuery{Since: within(10, 1)}), (SearchQuery{Since: within(10, 1_000)}); a.Fingerprint() != b.Fingerprint() {
		t.Errorf("since 10s+1ns and since 10s+1µs select the same messages but differ")
	}
	// Cursors given out before the bound was fingerprinted as applied
	// stay valid: this value is what the releases before gave
	// (1ae7454 on).
	if got := base.Fingerprint(); got != 0x746beb1bb4196e94 {
		t.Errorf("Fingerprint(%+v) = %#x, want %#x as before", base, got, uint64(0x746beb1bb4196e94))
	}
	for _, q := range same {
		if q.Fingerprint() != base.Fingerprint() {
			t.Errorf("Fingerprint(%+v) differs from Fingerprint(%+v)", q, base)
		}
	}
	differ := []SearchQuery{
		{},
		{Terms: Terms("hello"), OwnerEmail: "ada@example.com", Since: at(10), Until: at(20)},
		{Terms: Terms("hello world"), OwnerEmail: "bob@example.com", Since: at(10), Until: at(20)},
		{Terms: Terms("hello world"), OwnerEmail: "ada@example.com", Until: at(20)},
		{Terms: Terms("hello world"), OwnerEmail: "ada@example.com", Since: at(10)},
		{Terms: Terms("hello world"), OwnerEmail: "ada@example.com", Since: at(20), Until: at(10)},
		{Terms: Terms("hello world"), OwnerEmail: "ada@example.com", Since: at(10), Until: at(21)},
		{Terms: Terms("helloworld"), OwnerEmail: "ada@example.com", Since: at(10), Until: at(20)},
		// Within the same microsecond, yet a message at exactly 10s is
		// after one bound and not the other.
		{Terms: Terms("hello world"), OwnerEmail: "ada@example.com", Since: within(10, 500), Until: at(20)},
		{Terms: Terms("hello world"), OwnerEmail: "ada@example.com", Since: at(10), Until: within(20, 1)},
		{Terms: Terms("hello"), OwnerEmail: "world ada@example.com", Since: at(10), Until: at(20)},
	}
	for _, q := range differ {
		if q.Fingerprint() == base.Fingerprint() {
			t.Errorf("Fingerprint(%+v) equals Fingerprint(%+v)", q, base)
		}
	}
}
