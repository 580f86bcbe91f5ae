package http

import (
	"crypto/ecdh"
	"net/http"
	"testing"
)

// FuzzPushSubscriptionBody: whatever a client sends as a subscription,
// the parser never panics; it refuses with a 400 or a 422 naming a
// field, or returns a subscription whose keys are what the sender needs.
// Seeds: testdata/fuzz/FuzzPushSubscriptionBody.
func FuzzPushSubscriptionBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		sub, err := parsePushSubscription(body)
		if err != nil {
			p, _, known := problemFor(err)
			if !known || p.Status != http.StatusBadRequest && p.Status != http.StatusUnprocessableEntity {
				t.Fatalf("refusal %v answers %d", err, p.Status)
			}
			if p.Status == http.StatusUnprocessableEntity && len(p.Violations) == 0 {
				t.Fatalf("a 422 naming no field: %v", err)
			}
			return
		}
		if sub.Endpoint == "" || len(sub.Auth) != 16 || len(sub.P256dh) != 65 {
			t.Fatalf("accepted %+v", sub)
		}
		if _, err := ecdh.P256().NewPublicKey(sub.P256dh); err != nil {
			t.Fatalf("accepted a p256dh off the curve: %v", err)
		}
	})
}
