package http

import (
	"bytes"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"herald/model"
	"herald/push"
)

// Web Push: the server's VAPID public key and the caller's browser
// subscriptions. Sending is package push's, run beside the server.

// PushConfig turns Web Push on.
type PushConfig struct {
	// Contact is --push-contact; "" leaves push off, and its routes 404.
	Contact string
	// AllowPrivate accepts endpoints on private addresses.
	AllowPrivate bool
	// Resolver checks endpoints' hosts; nil is net.DefaultResolver.
	Resolver push.Resolver
}

// pushState is what the push routes keep between requests.
type pushState struct {
	cfg PushConfig
	key atomic.Pointer[string] // the VAPID public key, once read
}

var pushSubscriptionFields = fieldSpec{
	writable: []string{"endpoint", "expirationTime", "keys"},
	readOnly: []string{"id", "createdAt", "lastSuccessAt"},
	jsonOnly: true,
}

// errPushOff answers every push route while push is off.
var errPushOff = &requestError{status: http.StatusNotFound,
	msg: "Web Push is not configured on this server (its operator has not set --push-contact)"}

type pushKeyJSON struct {
	PublicKey string `json:"publicKey"`
}

type pushSubscriptionJSON struct {
	ID            uint64   `json:"id"`
	Endpoint      string   `json:"endpoint"`
	CreatedAt     apiTime  `json:"createdAt"`
	LastSuccessAt *apiTime `json:"lastSuccessAt"`
}

type pushSubscriptionListJSON struct {
	Items []pushSubscriptionJSON `json:"items"`
}

func newPushSubscriptionJSON(s *model.PushSubscription) pushSubscriptionJSON {
	out := pushSubscriptionJSON{ID: s.ID, Endpoint: s.Endpoint, CreatedAt: apiTime(s.CreatedAt)}
	if !s.LastSuccessAt.IsZero() {
		out.LastSuccessAt = ptrTo(apiTime(s.LastSuccessAt))
	}
	return out
}

// pushKey answers GET /api/push/key: the public key a browser subscribes
// with (applicationServerKey).
func (s *Server) pushKey(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if s.push.cfg.Contact == "" {
		return errPushOff
	}
	key := s.push.key.Load()
	if key == nil {
		keys, err := s.store.VAPIDKeys(r.Context(), push.GenerateKeys)
		if err != nil {
			return err
		}
		k := push.PublicKey(keys)
		s.push.key.Store(&k)
		key = &k
	}
	s.writeJSON(w, r, http.StatusOK, pushKeyJSON{PublicKey: *key})
	return nil
}

// createPushSubscription answers POST /api/me/push-subscriptions with a
// browser's PushSubscription: 201 for a new one (or one moved from
// another account), 200 for the caller's own endpoint again.
func (s *Server) createPushSubscription(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if s.push.cfg.Contact == "" {
		return errPushOff
	}
	body, err := readJSONBody(w, r, s.maxBody, pushSubscriptionFields)
	if err != nil {
		return err
	}
	sub, err := parsePushSubscription(body)
	if err != nil {
		return err
	}
	resolver := s.push.cfg.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	if problem := push.EndpointProblem(r.Context(), resolver, sub.Endpoint, s.push.cfg.AllowPrivate); problem != "" {
		var invalid model.ValidationError
		invalid.Add("endpoint", problem)
		return invalid.Err()
	}
	created, err := s.store.SavePushSubscription(r.Context(), model.ByToken(caller(r).tokenHash), sub)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	s.writeJSON(w, r, status, newPushSubscriptionJSON(sub))
	return nil
}

// listPushSubscriptions answers GET /api/me/push-subscriptions.
func (s *Server) listPushSubscriptions(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if s.push.cfg.Contact == "" {
		return errPushOff
	}
	subs, err := s.store.PushSubscriptions(r.Context(), model.ByToken(caller(r).tokenHash))
	if err != nil {
		return err
	}
	out := pushSubscriptionListJSON{Items: make([]pushSubscriptionJSON, len(subs))}
	for i, sub := range subs {
		out.Items[i] = newPushSubscriptionJSON(sub)
	}
	s.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// deletePushSubscription answers DELETE /api/me/push-subscriptions/{id};
// someone else's is as unknown as one never made.
func (s *Server) deletePushSubscription(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error {
	if s.push.cfg.Contact == "" {
		return errPushOff
	}
	id, err := strconv.ParseUint(ps.ByName("id"), 10, 64)
	if err != nil || id == 0 {
		return model.Errorf(model.ErrNotFound, "push subscription %q does not exist", ps.ByName("id"))
	}
	if err := s.store.DeletePushSubscription(r.Context(), model.ByToken(caller(r).tokenHash), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// readJSONBody reads a body that only JSON can carry, within maxBytes,
// answering as decodeBody does: 413 beyond the bound, 415 for another
// media type, 400 naming where malformed JSON goes wrong.
func readJSONBody(w http.ResponseWriter, r *http.Request, maxBytes int64, spec fieldSpec) ([]byte, error) {
	media, _, err := boundedBody(w, r, maxBytes, spec)
	if err != nil {
		return nil, err
	}
	if media != mediaJSON {
		return nil, unsupportedMediaType("Content-Type %s is not supported here; %s", media, whatToSend(spec))
	}
	b, err := io.ReadAll(r.Body)
	if isTooLarge(err) {
		return nil, bodyTooLarge(maxBytes)
	}
	return b, err
}

// parsePushSubscription reads a browser's PushSubscription JSON:
// {"endpoint", "expirationTime" (milliseconds since 1970, or null),
// "keys": {"p256dh", "auth"}}, each key base64url (padded or not). A
// malformed body is a 400; a value that breaks a rule is a 422 naming
// it: p256dh must be an uncompressed P-256 point on the curve, auth 16
// bytes. The endpoint's reachability is checked apart
// (push.EndpointProblem).
func parsePushSubscription(b []byte) (*model.PushSubscription, error) {
	if err := checkJSONSyntax(b); err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil || raw == nil {
		return nil, badRequest("", "request body must be a JSON object")
	}
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	if err := checkFieldNames(names, pushSubscriptionFields); err != nil {
		return nil, err
	}
	var invalid model.ValidationError
	sub := &model.PushSubscription{}
	if err := jsonString(raw["endpoint"], &sub.Endpoint); err != nil || sub.Endpoint == "" {
		invalid.Add("endpoint", "must be the subscription's endpoint URL, a string")
	}
	if v, ok := raw["expirationTime"]; ok && !bytes.Equal(v, []byte("null")) {
		var ms float64
		if err := json.Unmarshal(v, &ms); err != nil || ms < 0 || ms > 1e15 || math.IsNaN(ms) {
			invalid.Add("expirationTime", "must be null or a time in milliseconds since 1970")
		} else {
			sub.ExpirationTime = time.UnixMilli(int64(ms)).UTC()
		}
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(raw["keys"], &keys); err != nil || keys == nil {
		invalid.Add("keys", "must be an object holding p256dh and auth")
		return nil, invalid.Err()
	}
	for name := range keys {
		if name != "p256dh" && name != "auth" {
			return nil, badRequest("keys."+name, "unknown field %q in keys; it takes p256dh and auth", name)
		}
	}
	var p256dh, authSecret string
	if jsonString(keys["p256dh"], &p256dh) != nil {
		invalid.Add("keys.p256dh", "must be a string")
	} else if sub.P256dh = decodeKey(p256dh); len(sub.P256dh) != 65 || sub.P256dh[0] != 4 {
		invalid.Add("keys.p256dh", "must be an uncompressed P-256 public key (65 bytes), base64url")
	} else if _, err := ecdh.P256().NewPublicKey(sub.P256dh); err != nil {
		invalid.Add("keys.p256dh", "must be a point on the P-256 curve")
	}
	if jsonString(keys["auth"], &authSecret) != nil {
		invalid.Add("keys.auth", "must be a string")
	} else if sub.Auth = decodeKey(authSecret); len(sub.Auth) != 16 {
		invalid.Add("keys.auth", "must be a 16-byte authentication secret, base64url")
	}
	if err := invalid.Err(); err != nil {
		return nil, err
	}
	return sub, nil
}

// jsonString reads v, a JSON string; absent and null are errors.
func jsonString(v json.RawMessage, into *string) error {
	if v == nil || bytes.Equal(v, []byte("null")) {
		return errors.New("absent")
	}
	return json.Unmarshal(v, into)
}

// decodeKey reads base64url, padded or not (browsers send it unpadded);
// nil when it is not.
func decodeKey(s string) []byte {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil
	}
	return b
}
