package http_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	heraldhttp "herald/http"
	"herald/http/internal/apitest"
	"herald/model"
	"herald/pg"
	"herald/push"
)

// The push tests run Herald's server and its sender against a push
// service on loopback that does what a real one does with what it gets:
// it decrypts each push with the subscription's private key (RFC 8291,
// written out here to check the library's encryption), verifies the
// VAPID signature with the key the server serves (RFC 8292), checks the
// headers, and answers as the test scripts.

const pushContact = "mailto:ops@herald.example"

// pushResolver answers names from its map, and for the rest says they do
// not exist: the tests reach no DNS server.
type pushResolver map[string][]string

func (r pushResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// withPush turns push on for the server, private addresses allowed (the
// push service is on loopback) unless private is false.
func withPush(resolver push.Resolver, allowPrivate bool) apitest.Option {
	return func(c *heraldhttp.Config) {
		c.Push = heraldhttp.PushConfig{Contact: pushContact, AllowPrivate: allowPrivate, Resolver: resolver}
	}
}

// device is a browser's subscription: its keys, which the push service
// decrypts with.
type device struct {
	name string
	key  *ecdh.PrivateKey
	auth []byte
}

func newDevice(t *testing.T, name string) *device {
	t.Helper()
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	auth := make([]byte, 16)
	_, _ = rand.Read(auth)
	return &device{name: name, key: k, auth: auth}
}

// subscription is the device's PushSubscription JSON for the service.
func (d *device) subscription(endpoint string) string {
	b, _ := json.Marshal(map[string]any{"endpoint": endpoint, "expirationTime": nil, "keys": map[string]string{
		"p256dh": base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes()),
		"auth":   base64.RawURLEncoding.EncodeToString(d.auth)}})
	return string(b)
}

// received is one push as the push service read it.
type received struct {
	device  string
	payload map[string]any
	raw     []byte
	header  http.Header
	status  int // what the service answered
}

// pushService is the push service on loopback.
type pushService struct {
	t         *testing.T
	srv       *httptest.Server
	serverKey func() *ecdsa.PublicKey // the VAPID key Herald serves

	// hold, when set, keeps the next request waiting until it is closed:
	// a push service slow to answer while its sender dies.
	hold     chan struct{}
	held     chan struct{}
	mu       sync.Mutex
	devices  map[string]*device
	script   map[string][]int // answers per device, then 201
	got      []received
	arrived  chan struct{}
	problems []string
}

func newPushService(t *testing.T) *pushService {
	ps := &pushService{t: t, devices: make(map[string]*device), script: make(map[string][]int), arrived: make(chan struct{}, 1000)}
	ps.srv = httptest.NewTLSServer(http.HandlerFunc(ps.serve))
	t.Cleanup(ps.srv.Close)
	return ps
}

func (ps *pushService) endpoint(d *device) string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.devices[d.name] = d
	return ps.srv.URL + "/push/" + d.name
}

// answer scripts the device's next answers.
func (ps *pushService) answer(d *device, statuses ...int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.script[d.name] = append(ps.script[d.name], statuses...)
}

func (ps *pushService) problem(format string, args ...any) {
	ps.problems = append(ps.problems, fmt.Sprintf(format, args...))
}

func (ps *pushService) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	ps.mu.Lock()
	hold := ps.hold
	ps.hold = nil
	ps.mu.Unlock()
	if hold != nil {
		ps.held <- struct{}{}
		<-hold
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	name := strings.TrimPrefix(r.URL.Path, "/push/")
	d := ps.devices[name]
	if d == nil || r.Method != http.MethodPost {
		ps.problem("%s %s: no such device", r.Method, r.URL.Path)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	if got := r.Header.Get("Content-Encoding"); got != "aes128gcm" {
		ps.problem("Content-Encoding %q", got)
	}
	if got := r.Header.Get("TTL"); got != "86400" {
		ps.problem("TTL %q, want 86400", got)
	}
	if topic := r.Header.Get("Topic"); len(topic) == 0 || len(topic) > 32 || strings.Trim(topic, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != "" {
		ps.problem("Topic %q: want 1 to 32 base64url characters", topic)
	}
	if len(body) > 4096 {
		ps.problem("a push of %d bytes, more than 4096", len(body))
	}
	ps.checkVAPID(r.Header.Get("Authorization"))
	plain, err := decryptPush(d, body)
	var payload map[string]any
	if err != nil {
		ps.problem("decrypting a push to %s: %v", name, err)
	} else if len(plain) > 3000 {
		ps.problem("a payload of %d bytes, more than 3000", len(plain))
	} else if err := json.Unmarshal(plain, &payload); err != nil {
		ps.problem("payload %q: %v", plain, err)
	}
	status := http.StatusCreated
	if s := ps.script[name]; len(s) > 0 {
		status, ps.script[name] = s[0], s[1:]
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	ps.got = append(ps.got, received{device: name, payload: payload, raw: plain, header: r.Header.Clone(), status: status})
	w.WriteHeader(status)
	ps.arrived <- struct{}{}
}

// checkVAPID verifies the Authorization header: "vapid t=<JWT>, k=<key>",
// the key the server serves, an ES256 signature by it, aud the service's
// origin, exp within 24 hours, sub the contact exactly.
func (ps *pushService) checkVAPID(h string) {
	rest, ok := strings.CutPrefix(h, "vapid ")
	if !ok {
		ps.problem("Authorization %q is not vapid", h)
		return
	}
	var token, key string
	for _, part := range strings.Split(rest, ",") {
		part = strings.TrimSpace(part)
		if v, ok := strings.CutPrefix(part, "t="); ok {
			token = v
		} else if v, ok := strings.CutPrefix(part, "k="); ok {
			key = v
		}
	}
	want := ps.serverKey()
	if k, _ := base64.RawURLEncoding.DecodeString(key); !bytes.Equal(k, mustBytes(want)) {
		ps.problem("k= is not the key the server serves")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		ps.problem("the JWT has %d parts", len(parts))
		return
	}
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if len(sig) != 64 || !ecdsa.Verify(want, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		ps.problem("the VAPID signature does not verify with the served key")
	}
	var header struct{ Alg string }
	if b, _ := base64.RawURLEncoding.DecodeString(parts[0]); json.Unmarshal(b, &header) != nil || header.Alg != "ES256" {
		ps.problem("JWT header %s", b)
	}
	var claims struct {
		Aud, Sub string
		Exp      int64
	}
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if err := json.Unmarshal(b, &claims); err != nil {
		ps.problem("JWT claims %s: %v", b, err)
	}
	if claims.Aud != ps.srv.URL {
		ps.problem("aud %q, want the push service's origin %q", claims.Aud, ps.srv.URL)
	}
	if claims.Sub != pushContact {
		ps.problem("sub %q, want %q exactly", claims.Sub, pushContact)
	}
	if exp := time.Unix(claims.Exp, 0); !exp.After(time.Now()) || exp.After(time.Now().Add(24*time.Hour)) {
		ps.problem("exp %v: want within the next 24 hours", exp)
	}
}

// decryptPush undoes RFC 8291 with the device's keys: the aes128gcm
// header (salt, record size, the server's one-time public key), the
// shared secret, the keys HKDF derives, one record, its padding.
func decryptPush(d *device, body []byte) ([]byte, error) {
	if len(body) < 21 {
		return nil, errors.New("shorter than the header")
	}
	salt, rs, idLen := body[:16], binary.BigEndian.Uint32(body[16:20]), int(body[20])
	if len(body) < 21+idLen || idLen != 65 {
		return nil, fmt.Errorf("key id of %d bytes", idLen)
	}
	asPublic, ciphertext := body[21:21+idLen], body[21+idLen:]
	if uint32(len(body)) > rs {
		return nil, fmt.Errorf("more than one record (%d bytes, record size %d)", len(body), rs)
	}
	as, err := ecdh.P256().NewPublicKey(asPublic)
	if err != nil {
		return nil, err
	}
	secret, err := d.key.ECDH(as)
	if err != nil {
		return nil, err
	}
	info := append(append([]byte("WebPush: info\x00"), d.key.PublicKey().Bytes()...), asPublic...)
	ikm, err := hkdf.Key(sha256.New, secret, d.auth, string(info), 32)
	if err != nil {
		return nil, err
	}
	prk, err := hkdf.Extract(sha256.New, ikm, salt)
	if err != nil {
		return nil, err
	}
	cek, _ := hkdf.Expand(sha256.New, prk, "Content-Encoding: aes128gcm\x00", 16)
	nonce, _ := hkdf.Expand(sha256.New, prk, "Content-Encoding: nonce\x00", 12)
	block, err := aes.NewCipher(cek)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	plain, err := gcm.Open(nil, nonce, ciphertext, nil)
	if err != nil {
		return nil, err
	}
	end := len(plain) - 1
	for end >= 0 && plain[end] == 0 {
		end--
	}
	if end < 0 || plain[end] != 2 {
		return nil, errors.New("no last-record delimiter")
	}
	return plain[:end], nil
}

// pushes returns what arrived so far.
func (ps *pushService) pushes() []received {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([]received(nil), ps.got...)
}

// waitFor waits until n pushes arrived in all, advancing clock (the
// store's and the sender's) a second at a time so retries come due.
func (ps *pushService) waitFor(n int, clock *apitest.Clock) []received {
	ps.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if got := ps.pushes(); len(got) >= n {
			return got
		}
		select {
		case <-ps.arrived:
		case <-time.After(50 * time.Millisecond):
			if clock != nil {
				clock.Advance(time.Second)
			}
		}
	}
	got := ps.pushes()
	ps.t.Fatalf("%d pushes arrived in 30 s, want %d", len(got), n)
	return got
}

// quiet checks that nothing more arrives for a while, the clock moving
// on, and that the service found nothing wrong.
func (ps *pushService) quiet(n int, clock *apitest.Clock) {
	ps.t.Helper()
	for range 10 {
		time.Sleep(30 * time.Millisecond)
		if clock != nil {
			clock.Advance(time.Minute)
		}
	}
	if got := ps.pushes(); len(got) != n {
		ps.t.Errorf("%d pushes arrived, want %d: %v", len(got), n, got)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.problems {
		ps.t.Error("push service: " + p)
	}
	ps.problems = nil
}

// sender runs a push sender over db, as main does, until the test ends
// or stop is called.
type sender struct {
	metrics *metrics.Set
	stop    func()
}

func startSender(t *testing.T, db any, ps *pushService, clock *apitest.Clock, tune func(*push.Config)) *sender {
	t.Helper()
	store, ok := db.(push.Store)
	if !ok {
		t.Fatalf("the store %T does not keep pushes", db)
	}
	set := metrics.NewSet()
	cfg := push.Config{Contact: pushContact, PublicURL: "https://herald.example", AllowPrivate: true,
		TLS: ps.srv.Client().Transport.(*http.Transport).TLSClientConfig, RetryBase: time.Second,
		Poll: 20 * time.Millisecond, Metrics: set, Now: clock.Now}
	if tune != nil {
		tune(&cfg)
	}
	s, err := push.New(context.Background(), store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return &sender{metrics: set, stop: stop}
}

func (s *sender) count(name string) uint64 {
	return s.metrics.GetOrCreateCounter("herald_push_" + name + "_total").Get()
}

// servedKey reads the server's VAPID key through the API.
func servedKey(e *apitest.Env, token string) func() *ecdsa.PublicKey {
	e.T.Helper()
	res := e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/push/key", Token: token})
	if res.Status != http.StatusOK {
		e.T.Fatalf("GET /api/push/key: %d %s", res.Status, res.Body)
	}
	raw, err := base64.RawURLEncoding.DecodeString(res.JSON(e.T)["publicKey"].(string))
	if err != nil || len(raw) != 65 {
		e.T.Fatalf("publicKey %s: %v", res.Body, err)
	}
	k, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), raw)
	if err != nil {
		e.T.Fatal(err)
	}
	return func() *ecdsa.PublicKey { return k }
}

func subscribe(e *apitest.Env, token, body string) *apitest.Response {
	e.T.Helper()
	return e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/me/push-subscriptions", Token: token,
		ContentType: "application/json", Body: body})
}

func mustSubscribe(e *apitest.Env, token, body string, status int) map[string]any {
	e.T.Helper()
	res := subscribe(e, token, body)
	if res.Status != status {
		e.T.Fatalf("subscribe: %d %s, want %d", res.Status, res.Body, status)
	}
	return res.JSON(e.T)
}

func listSubscriptions(e *apitest.Env, token string) []any {
	e.T.Helper()
	res := e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/me/push-subscriptions", Token: token})
	if res.Status != http.StatusOK {
		e.T.Fatalf("list subscriptions: %d %s", res.Status, res.Body)
	}
	return res.JSON(e.T)["items"].([]any)
}

// TestPushOff: without --push-contact every push route is 404 saying
// push is not configured, and nothing else changes.
func TestPushOff(t *testing.T) {
	e := apitest.New(t)
	ada := e.Register("ada@example.com", "password one")
	for _, req := range []apitest.Request{
		{Method: http.MethodGet, Path: "/api/push/key", Token: ada},
		{Method: http.MethodGet, Path: "/api/me/push-subscriptions", Token: ada},
		{Method: http.MethodPost, Path: "/api/me/push-subscriptions", Token: ada, ContentType: "application/json",
			Body: newDevice(t, "x").subscription("https://push.example/x")},
		{Method: http.MethodDelete, Path: "/api/me/push-subscriptions/1", Token: ada},
	} {
		p := apitest.AssertProblem(t, e.Do(req), http.StatusNotFound)
		if !strings.Contains(p["detail"].(string), "not configured") {
			t.Errorf("%s %s: detail %q, want it to say push is not configured", req.Method, req.Path, p["detail"])
		}
	}
}

// TestPushSubscriptionRoutes: the key, and subscriptions made, updated,
// moved, listed, capped, deleted, over the API.
func TestPushSubscriptionRoutes(t *testing.T) {
	e := apitest.New(t, withPush(pushResolver{"push.example": {"142.250.74.46"}}, false))
	ada := e.Register("ada@example.com", "password one")
	bob := e.Register("bob@example.com", "password two")
	key := e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/push/key", Token: ada}).JSON(t)["publicKey"]
	if again := e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/push/key", Token: bob}).JSON(t)["publicKey"]; again != key {
		t.Errorf("the key changed between calls: %v, %v", key, again)
	}
	apitest.AssertProblem(t, e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/push/key"}), http.StatusUnauthorized)

	phone := newDevice(t, "phone")
	first := mustSubscribe(e, ada, phone.subscription("https://push.example/phone"), http.StatusCreated)
	if first["endpoint"] != "https://push.example/phone" || first["lastSuccessAt"] != nil || first["id"] == nil {
		t.Errorf("a new subscription = %v", first)
	}
	e.Clock.Advance(time.Second)
	again := mustSubscribe(e, ada, newDevice(t, "phone2").subscription("https://push.example/phone"), http.StatusOK)
	if again["id"] != first["id"] {
		t.Errorf("the same endpoint again = %v, want subscription %v updated", again, first["id"])
	}
	e.Clock.Advance(time.Second)
	laptop := mustSubscribe(e, ada, newDevice(t, "laptop").subscription("https://push.example/laptop"), http.StatusCreated)
	items := listSubscriptions(e, ada)
	if len(items) != 2 || items[0].(map[string]any)["id"] != laptop["id"] {
		t.Errorf("ada's subscriptions = %v, want the laptop's first", items)
	}
	moved := mustSubscribe(e, bob, newDevice(t, "laptop").subscription("https://push.example/laptop"), http.StatusCreated)
	if got := listSubscriptions(e, ada); len(got) != 1 {
		t.Errorf("ada's subscriptions after bob registered her laptop's endpoint = %v", got)
	}
	del := func(token string, id any) *apitest.Response {
		return e.Do(apitest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/push-subscriptions/%v", id), Token: token})
	}
	apitest.AssertProblem(t, del(ada, moved["id"]), http.StatusNotFound)
	apitest.AssertProblem(t, del(ada, "x"), http.StatusNotFound)
	if res := del(bob, moved["id"]); res.Status != http.StatusNoContent {
		t.Errorf("bob deleting his subscription: %d %s", res.Status, res.Body)
	}
	for i := 2; i <= model.MaxPushSubscriptions; i++ {
		mustSubscribe(e, ada, newDevice(t, "d").subscription(fmt.Sprintf("https://push.example/%d", i)), http.StatusCreated)
	}
	p := apitest.AssertProblem(t, subscribe(e, ada, newDevice(t, "d").subscription("https://push.example/11")), http.StatusConflict)
	if !strings.Contains(p["detail"].(string), "10") || fmt.Sprint(apitest.ViolationPaths(p)) != "[endpoint]" {
		t.Errorf("an 11th subscription: %v, want the limit named", p)
	}
}

// TestPushSubscriptionRefused: each malformed or unreachable
// subscription is refused naming its field, and nothing is stored.
func TestPushSubscriptionRefused(t *testing.T) {
	resolver := pushResolver{"push.example": {"142.250.74.46"}, "inside.example": {"192.168.1.20"},
		"mixed.example": {"142.250.74.46", "10.0.0.3"}, "loop.example": {"::ffff:127.0.0.1"}}
	e := apitest.New(t, withPush(resolver, false))
	ada := e.Register("ada@example.com", "password one")
	d := newDevice(t, "d")
	p256dh := base64.RawURLEncoding.EncodeToString(d.key.PublicKey().Bytes())
	auth := base64.RawURLEncoding.EncodeToString(d.auth)
	body := func(endpoint, p256dh, auth string) string {
		return fmt.Sprintf(`{"endpoint":%q,"keys":{"p256dh":%q,"auth":%q}}`, endpoint, p256dh, auth)
	}
	offCurve := make([]byte, 65)
	offCurve[0], offCurve[64] = 4, 1
	compressed := append([]byte{2}, d.key.PublicKey().Bytes()[1:33]...)
	tests := []struct {
		name, body string
		status     int
		field      string
	}{
		{"http endpoint", body("http://push.example/x", p256dh, auth), 422, "endpoint"},
		{"relative endpoint", body("/push/x", p256dh, auth), 422, "endpoint"},
		{"unresolvable host", body("https://nowhere.example/x", p256dh, auth), 422, "endpoint"},
		{"private host", body("https://inside.example/x", p256dh, auth), 422, "endpoint"},
		{"one private address among public ones", body("https://mixed.example/x", p256dh, auth), 422, "endpoint"},
		{"IPv4-mapped loopback", body("https://loop.example/x", p256dh, auth), 422, "endpoint"},
		{"loopback literal", body("https://127.0.0.1:8443/x", p256dh, auth), 422, "endpoint"},
		{"IPv6 loopback", body("https://[::1]/x", p256dh, auth), 422, "endpoint"},
		{"link-local with a zone", body("https://[fe80::1%25eth0]/x", p256dh, auth), 422, "endpoint"},
		{"unique local", body("https://[fd00::5]/x", p256dh, auth), 422, "endpoint"},
		{"shared address space", body("https://100.64.1.1/x", p256dh, auth), 422, "endpoint"},
		{"cloud metadata", body("https://169.254.169.254/x", p256dh, auth), 422, "endpoint"},
		{"p256dh not base64url", body("https://push.example/x", "!!!", auth), 422, "keys.p256dh"},
		{"p256dh too short", body("https://push.example/x", p256dh[:40], auth), 422, "keys.p256dh"},
		{"p256dh compressed", body("https://push.example/x", base64.RawURLEncoding.EncodeToString(compressed), auth), 422, "keys.p256dh"},
		{"p256dh off the curve", body("https://push.example/x", base64.RawURLEncoding.EncodeToString(offCurve), auth), 422, "keys.p256dh"},
		{"auth too long", body("https://push.example/x", p256dh, auth+"AAAA"), 422, "keys.auth"},
		{"auth missing", `{"endpoint":"https://push.example/x","keys":{"p256dh":"` + p256dh + `"}}`, 422, "keys.auth"},
		{"keys missing", `{"endpoint":"https://push.example/x"}`, 422, "keys"},
		{"expirationTime a string", `{"endpoint":"https://push.example/x","expirationTime":"soon","keys":{"p256dh":"` + p256dh + `","auth":"` + auth + `"}}`, 422, "expirationTime"},
		{"unknown field", `{"endpoint":"https://push.example/x","color":"red","keys":{"p256dh":"` + p256dh + `","auth":"` + auth + `"}}`, 400, "color"},
		{"read-only field", `{"id":3,"endpoint":"https://push.example/x","keys":{"p256dh":"` + p256dh + `","auth":"` + auth + `"}}`, 400, "id"},
		{"not JSON", `{"endpoint":`, 400, ""},
		{"an array", `[]`, 400, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := apitest.AssertProblem(t, subscribe(e, ada, tt.body), tt.status)
			if paths := apitest.ViolationPaths(p); tt.field != "" && (len(paths) != 1 || paths[0] != tt.field) {
				t.Errorf("violations %v, want %s named", paths, tt.field)
			}
		})
	}
	res := e.Do(apitest.Request{Method: http.MethodPost, Path: "/api/me/push-subscriptions", Token: ada,
		ContentType: "application/x-www-form-urlencoded", Body: "endpoint=https://push.example/x"})
	apitest.AssertProblem(t, res, http.StatusUnsupportedMediaType)
	if got := listSubscriptions(e, ada); len(got) != 0 {
		t.Errorf("refused subscriptions stored: %v", got)
	}
	// Browsers give expirationTime as a number of milliseconds.
	mustSubscribe(e, ada, `{"endpoint":"https://push.example/x","expirationTime":1798761600000,"keys":{"p256dh":"`+p256dh+`","auth":"`+auth+`"}}`, http.StatusCreated)
}

// pushEnv is a server with push on over the store under test, a push
// service, and three people: ada and carol with devices, bob without.
type pushEnv struct {
	*apitest.Env
	ps               *pushService
	ada, bob, carol  string
	phone, tablet, c *device
}

func newPushEnv(t *testing.T) *pushEnv {
	t.Helper()
	ps := newPushService(t)
	e := apitest.New(t, withPush(nil, true))
	pe := &pushEnv{Env: e, ps: ps}
	pe.ada = e.Register("ada@example.com", "password one")
	pe.bob = e.Register("bob@example.com", "password two")
	pe.carol = e.Register("carol@example.com", "password three")
	ps.serverKey = servedKey(e, pe.ada)
	pe.phone, pe.tablet, pe.c = newDevice(t, "ada-phone"), newDevice(t, "ada-tablet"), newDevice(t, "carol-phone")
	mustSubscribe(e, pe.ada, pe.phone.subscription(ps.endpoint(pe.phone)), http.StatusCreated)
	mustSubscribe(e, pe.ada, pe.tablet.subscription(ps.endpoint(pe.tablet)), http.StatusCreated)
	mustSubscribe(e, pe.carol, pe.c.subscription(ps.endpoint(pe.c)), http.StatusCreated)
	return pe
}

// TestPushDelivered: a mention is pushed to each of the recipient's
// devices and to nobody else, encrypted, signed, with the headers the
// contract says; a reply with normal urgency; each push's topic is its
// notification's.
func TestPushDelivered(t *testing.T) {
	pe := newPushEnv(t)
	s := startSender(t, pe.DB, pe.ps, pe.Clock, nil)
	m := pe.Post(pe.bob, "lunch, @ada?")
	got := pe.ps.waitFor(2, nil)
	devices := map[string]bool{}
	for _, r := range got {
		devices[r.device] = true
		p := r.payload
		if p["kind"] != "mention" || p["title"] != "bob mentioned you" || p["body"] != "lunch, @ada?" ||
			p["messageId"] != m["id"] || p["url"] != fmt.Sprintf("https://herald.example/#/messages/%v", m["id"]) || p["id"] == nil {
			t.Errorf("payload %s", r.raw)
		}
		if len(p) != 6 {
			t.Errorf("payload %s: want exactly kind, id, title, body, url, messageId", r.raw)
		}
		if u := r.header.Get("Urgency"); u != "high" {
			t.Errorf("a mention's Urgency %q, want high", u)
		}
	}
	if !devices["ada-phone"] || !devices["ada-tablet"] {
		t.Errorf("pushed to %v, want both of ada's devices", devices)
	}
	if got[0].header.Get("Topic") != got[1].header.Get("Topic") {
		t.Error("one notification's pushes have different topics")
	}
	asked := pe.Post(pe.ada, "who else comes?")
	postReply(pe.Env, pe.carol, uint64(asked["id"].(float64)), "I'll come too")
	got = pe.ps.waitFor(4, nil)
	for _, r := range got[2:] {
		if r.payload["kind"] != "reply" || r.header.Get("Urgency") != "normal" || r.device == "carol-phone" {
			t.Errorf("the reply's push to %s: %s, Urgency %q", r.device, r.raw, r.header.Get("Urgency"))
		}
		if r.header.Get("Topic") == got[0].header.Get("Topic") {
			t.Error("two notifications' pushes share a topic")
		}
	}
	pe.ps.quiet(4, nil)
	if s.count("sent") != 4 {
		t.Errorf("herald_push_sent_total = %d, want 4", s.count("sent"))
	}
	items := listSubscriptions(pe.Env, pe.ada)
	for _, it := range items {
		if it.(map[string]any)["lastSuccessAt"] == nil {
			t.Errorf("a subscription pushed to has no lastSuccessAt: %v", it)
		}
	}
}

// TestPushAnswers: 410 deletes the subscription; 429 (Retry-After) and
// 500 are tried again, with the same topic, then delivered; 400 drops
// the push and keeps the subscription; 404 deletes.
func TestPushAnswers(t *testing.T) {
	pe := newPushEnv(t)
	pe.ps.answer(pe.phone, http.StatusGone)
	pe.ps.answer(pe.tablet, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusCreated)
	pe.ps.answer(pe.c, http.StatusBadRequest)
	s := startSender(t, pe.DB, pe.ps, pe.Clock, nil)
	pe.Post(pe.bob, "@ada and @carol, look")
	got := pe.ps.waitFor(5, pe.Clock)
	pe.ps.quiet(5, pe.Clock)
	var tablet []received
	for _, r := range got {
		if r.device == "ada-tablet" {
			tablet = append(tablet, r)
		}
	}
	if len(tablet) != 3 || tablet[0].header.Get("Topic") != tablet[2].header.Get("Topic") || !bytes.Equal(tablet[0].raw, tablet[2].raw) {
		t.Errorf("the tablet got %d pushes, want 3 of one notification", len(tablet))
	}
	if got := listSubscriptions(pe.Env, pe.ada); len(got) != 1 {
		t.Errorf("ada's subscriptions after the phone's 410 = %v, want the tablet's only", got)
	}
	if got := listSubscriptions(pe.Env, pe.carol); len(got) != 1 {
		t.Errorf("carol's subscriptions after a 400 = %v, want hers kept", got)
	}
	for name, want := range map[string]uint64{"sent": 1, "retried": 2, "failed": 1, "dropped": 1} {
		if got := s.count(name); got != want {
			t.Errorf("herald_push_%s_total = %d, want %d", name, got, want)
		}
	}
	// 404 deletes too; the next notification reaches only what is left.
	pe.ps.answer(pe.tablet, http.StatusNotFound)
	pe.Post(pe.bob, "@ada again")
	pe.ps.waitFor(6, pe.Clock)
	pe.ps.quiet(6, pe.Clock)
	if got := listSubscriptions(pe.Env, pe.ada); len(got) != 0 {
		t.Errorf("ada's subscriptions after a 404 = %v, want none", got)
	}
	if logs := pe.Logs.String(); strings.Contains(logs, base64.RawURLEncoding.EncodeToString(pe.phone.auth)) {
		t.Error("the log holds a subscription's secret")
	}
}

// TestPushGivesUpAtTTL: a push service that answers 503 for a day is
// tried until the push's TTL passes, then the push counts as failed and
// the subscription stays.
func TestPushGivesUpAtTTL(t *testing.T) {
	pe := newPushEnv(t)
	for range 200 {
		pe.ps.answer(pe.c, http.StatusServiceUnavailable)
	}
	s := startSender(t, pe.DB, pe.ps, pe.Clock, func(c *push.Config) { c.RetryMax = time.Hour })
	pe.Post(pe.bob, "@carol, are you there?")
	deadline := time.Now().Add(30 * time.Second)
	for s.count("failed") == 0 && time.Now().Before(deadline) {
		pe.Clock.Advance(10 * time.Minute)
		time.Sleep(20 * time.Millisecond)
	}
	if s.count("failed") != 1 || s.count("sent") != 0 || s.count("retried") == 0 {
		t.Errorf("after a day of 503: failed %d, sent %d, retried %d; want given up once", s.count("failed"), s.count("sent"), s.count("retried"))
	}
	if got := listSubscriptions(pe.Env, pe.carol); len(got) != 1 {
		t.Errorf("carol's subscriptions after giving up = %v, want hers kept", got)
	}
}

// TestPushPrivateAtSendTime: a subscription whose endpoint was public when
// it was made but resolves to loopback when the push is sent (DNS
// rebinding), and one written straight into the store, are never
// connected to: the pushes are dropped and counted.
func TestPushPrivateAtSendTime(t *testing.T) {
	ps := newPushService(t)
	e := apitest.New(t, withPush(pushResolver{"push.example": {"142.250.74.46"}}, false))
	ada := e.Register("ada@example.com", "password one")
	bob := e.Register("bob@example.com", "password two")
	ps.serverKey = servedKey(e, ada)
	d := newDevice(t, "rebound")
	port := ps.srv.Listener.Addr().(*net.TCPAddr).Port
	mustSubscribe(e, ada, d.subscription(fmt.Sprintf("https://push.example:%d/push/rebound", port)), http.StatusCreated)
	direct := newDevice(t, "direct")
	sub := &model.PushSubscription{Endpoint: ps.endpoint(direct), P256dh: direct.key.PublicKey().Bytes(), Auth: direct.auth}
	if _, err := e.DB.SavePushSubscription(context.Background(), model.ByUser(1), sub); err != nil {
		t.Fatal(err)
	}
	ps.endpoint(d)
	s := startSender(t, e.DB, ps, e.Clock, func(c *push.Config) {
		c.AllowPrivate = false
		c.Resolver = pushResolver{"push.example": {"127.0.0.1"}}
	})
	e.Post(bob, "@ada here")
	deadline := time.Now().Add(30 * time.Second)
	for s.count("dropped") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	ps.quiet(0, nil)
	if s.count("dropped") != 2 || s.count("sent") != 0 {
		t.Errorf("dropped %d, sent %d; want both pushes dropped", s.count("dropped"), s.count("sent"))
	}
}

// TestPushResumesAfterRestart: a notification written while no sender
// runs is pushed when the server starts again on the same database
// (a new store handle), once.
func TestPushResumesAfterRestart(t *testing.T) {
	ps := newPushService(t)
	clock := apitest.NewClock()
	path := filepath.Join(t.TempDir(), "herald.db")
	cfg := heraldhttp.Config{Now: clock.Now, Push: heraldhttp.PushConfig{Contact: pushContact, AllowPrivate: true}}
	db := apitest.OpenStore(t, path, clock.Now)
	e, stop := apitest.Serve(t, db, cfg, nil)
	ada := e.Register("ada@example.com", "password one")
	bob := e.Register("bob@example.com", "password two")
	ps.serverKey = servedKey(e, ada)
	d := newDevice(t, "phone")
	mustSubscribe(e, ada, d.subscription(ps.endpoint(d)), http.StatusCreated)
	first := startSender(t, db, ps, clock, nil)
	e.Post(bob, "@ada one")
	ps.waitFor(1, nil)
	first.stop()
	e.Post(bob, "@ada two, while nobody sends")
	stop()

	db = apitest.OpenStore(t, path, clock.Now)
	e, _ = apitest.Serve(t, db, cfg, nil)
	startSender(t, db, ps, clock, nil)
	got := ps.waitFor(2, nil)
	ps.quiet(2, nil)
	if got[1].payload["body"] != "@ada two, while nobody sends" {
		t.Errorf("after the restart the push carried %s", got[1].raw)
	}
	if res := e.Do(apitest.Request{Method: http.MethodGet, Path: "/api/push/key", Token: ada}); res.JSON(t)["publicKey"] == nil {
		t.Error("no key after the restart")
	}
}

// TestPushOnceAcrossInstances: on PostgreSQL two instances serve one
// database and each runs a sender; only the leader sends, so each push
// arrives once; when the leader stops, the other takes the lead and
// sends what comes next, once.
func TestPushOnceAcrossInstances(t *testing.T) {
	if !apitest.OnPostgres(t) {
		t.Skip("several instances share a database on PostgreSQL only; run with " + apitest.StoreEnv + "=postgres")
	}
	ps := newPushService(t)
	clock := apitest.NewClock()
	path := filepath.Join(t.TempDir(), "herald.db")
	cfg := heraldhttp.Config{Now: clock.Now, Push: heraldhttp.PushConfig{Contact: pushContact, AllowPrivate: true}}
	one := apitest.OpenStore(t, path, clock.Now).(*pg.DB)
	two := apitest.OpenStore(t, path, clock.Now).(*pg.DB)
	e1, stop1 := apitest.Serve(t, one, cfg, nil)
	e2, _ := apitest.Serve(t, two, cfg, nil)
	ctx := context.Background()
	if !one.Leads(ctx) || two.Leads(ctx) {
		t.Fatal("want the first instance to lead and the second not")
	}
	ada := e1.Register("ada@example.com", "password one")
	bob := e2.Register("bob@example.com", "password two")
	ps.serverKey = servedKey(e2, ada)
	d, d2 := newDevice(t, "phone"), newDevice(t, "laptop")
	mustSubscribe(e1, ada, d.subscription(ps.endpoint(d)), http.StatusCreated)
	mustSubscribe(e2, ada, d2.subscription(ps.endpoint(d2)), http.StatusCreated)
	s1 := startSender(t, one, ps, clock, func(c *push.Config) { c.Leading = one.Leading })
	startSender(t, two, ps, clock, func(c *push.Config) { c.Leading = two.Leading })
	for i := range 5 {
		(map[int]*apitest.Env{0: e1, 1: e2})[i%2].Post(bob, fmt.Sprintf("@ada number %d", i))
	}
	ps.waitFor(10, nil)
	ps.quiet(10, nil)
	// As serve stops: the sender, then the chores, which give the lead
	// up, then the store.
	s1.stop()
	one.Resign()
	stop1()
	deadline := time.Now().Add(30 * time.Second)
	for !two.Leads(ctx) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !two.Leading() {
		t.Fatal("the second instance did not take the lead")
	}
	e2.Post(bob, "@ada after the leader stopped")
	got := ps.waitFor(12, nil)
	ps.quiet(12, nil)
	seen := map[string]int{}
	for _, r := range got {
		seen[r.device+" "+strconv.Itoa(int(r.payload["id"].(float64)))]++
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("push %s arrived %d times", k, n)
		}
	}
}

// TestPushInFlightWhenKilled: a sender that dies while a push service has
// not answered yet leaves the push claimed; once its lease runs out the
// next sender sends it. That push may arrive twice (its first answer was
// lost), and nothing else repeats.
func TestPushInFlightWhenKilled(t *testing.T) {
	pe := newPushEnv(t)
	hold := make(chan struct{})
	pe.ps.mu.Lock()
	pe.ps.hold, pe.ps.held = hold, make(chan struct{}, 1)
	pe.ps.mu.Unlock()
	lease := func(c *push.Config) { c.Lease = 10 * time.Second }
	first := startSender(t, pe.DB, pe.ps, pe.Clock, lease)
	pe.Post(pe.bob, "@carol, one push only")
	select {
	case <-pe.ps.held:
	case <-time.After(30 * time.Second):
		t.Fatal("the push never reached the push service")
	}
	first.stop() // killed, its push unanswered
	close(hold)
	second := startSender(t, pe.DB, pe.ps, pe.Clock, lease)
	got := pe.ps.waitFor(2, pe.Clock)
	pe.ps.quiet(2, pe.Clock)
	if got[0].payload["id"] != got[1].payload["id"] || got[1].device != "carol-phone" {
		t.Errorf("pushes %s and %s, want one notification's, sent again", got[0].raw, got[1].raw)
	}
	if second.count("sent") != 1 {
		t.Errorf("the second sender sent %d, want 1", second.count("sent"))
	}
}

// mustBytes is a public key's uncompressed point.
func mustBytes(k *ecdsa.PublicKey) []byte {
	b, err := k.Bytes()
	if err != nil {
		panic(err)
	}
	return b
}

// TestPushBurst: one message mentioning 20 people with 10 devices each
// is pushed to each of the 200 devices once, through the pool's cap per
// push service, and the writes after it are not held up.
func TestPushBurst(t *testing.T) {
	ps := newPushService(t)
	e := apitest.New(t, withPush(nil, true), apitest.WithLimits(heraldhttp.Limits{RegistrationsPerAddress: apitest.UnlimitedWrites}))
	author := e.Register("author@example.com", "password zero")
	ps.serverKey = servedKey(e, author)
	var mentions []string
	for i := range 20 {
		token := e.Register(fmt.Sprintf("p%02d@example.com", i), "password "+strconv.Itoa(i))
		mentions = append(mentions, fmt.Sprintf("@p%02d", i))
		for j := range 10 {
			d := newDevice(t, fmt.Sprintf("p%02d-%d", i, j))
			mustSubscribe(e, token, d.subscription(ps.endpoint(d)), http.StatusCreated)
		}
	}
	s := startSender(t, e.DB, ps, e.Clock, nil)
	e.Post(author, "everyone: "+strings.Join(mentions, " "))
	start := time.Now()
	e.Post(author, "and a write right after")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a write during the burst took %v", took)
	}
	got := ps.waitFor(200, nil)
	ps.quiet(200, nil)
	devices := make(map[string]int)
	for _, r := range got {
		devices[r.device]++
	}
	if len(devices) != 200 {
		t.Errorf("%d devices reached, want 200", len(devices))
	}
	if s.count("sent") != 200 {
		t.Errorf("herald_push_sent_total = %d, want 200", s.count("sent"))
	}
}

// TestPushCarriesMessageAsItIs: a push carries its message as it is when
// it goes, not as it was when it was queued. A retry can come a day
// later: one whose message was deleted meanwhile is not sent at all (its
// words must not reach a phone after their author took them back), one
// whose message was edited is sent as it reads now.
func TestPushCarriesMessageAsItIs(t *testing.T) {
	pe := newPushEnv(t)
	pe.ps.answer(pe.tablet, http.StatusServiceUnavailable, http.StatusServiceUnavailable)
	s := startSender(t, pe.DB, pe.ps, pe.Clock, nil)
	gone := pe.Post(pe.bob, "@ada something bob takes back")
	pe.ps.waitFor(2, nil) // the phone's, and the tablet's 503
	pe.Remove(pe.bob, gone["id"].(float64))
	edited := pe.Post(pe.bob, "@ada as first written")
	pe.ps.waitFor(4, nil) // the phone's, and the tablet's second 503
	pe.Patch(pe.bob, edited["id"].(float64), "@ada as it reads now")
	got := pe.ps.waitFor(5, pe.Clock) // the tablet's retry of the edited one
	pe.ps.quiet(5, pe.Clock)
	if last := got[4]; last.device != "ada-tablet" || last.payload["body"] != "@ada as it reads now" {
		t.Errorf("the retry of the edited message carried %s to %s", last.raw, last.device)
	}
	for _, r := range got[2:] {
		if strings.Contains(string(r.raw), "takes back") {
			t.Errorf("a deleted message was pushed again: %s", r.raw)
		}
	}
	if n := s.count("dropped"); n != 1 {
		t.Errorf("herald_push_dropped_total = %d, want the deleted message's retry", n)
	}
}
