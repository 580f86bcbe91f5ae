package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/auth"
	"herald/bolt"
	heraldhttp "herald/http"
	"herald/http/netquirk"
	"herald/http/stream"
	"herald/model"
)

// fastParams keep argon2id real but cheap, so tests that register many users
// stay quick under -race. Production parameters are covered in auth/.
var fastParams = auth.Params{MemoryKiB: 64, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}

// testClock is a settable clock shared by the store, so tests can expire
// tokens without sleeping.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// env is a running Herald over a real store (see store_test.go), reached
// through real HTTP.
type env struct {
	t     *testing.T
	URL   string
	DB    testStore
	Clock *testClock
	Logs  *syncBuffer
	// Server and HTTP are the handler and the httptest server around it,
	// for tests that stop streams or reach the connections.
	Server *heraldhttp.Server
	HTTP   *httptest.Server
}

type envOption func(*heraldhttp.Config)

func withMaxBody(n int64) envOption {
	return func(c *heraldhttp.Config) { c.MaxBodyBytes = n }
}

// withLimits sets the limits; a zero WritesPerAccount keeps newEnv's.
func withLimits(l heraldhttp.Limits) envOption {
	return func(c *heraldhttp.Config) {
		if l.WritesPerAccount == (auth.Rate{}) {
			l.WritesPerAccount = c.Limits.WritesPerAccount
		}
		c.Limits = l
	}
}

// unlimitedWrites opens the write limit wide: tests that write a lot from
// one account test other things, on a clock that stands still. The limit
// itself is tested with its default (TestWriteLimits).
var unlimitedWrites = auth.Rate{Burst: 1 << 30, Every: time.Nanosecond}

func withStreams(l stream.Limits) envOption {
	return func(c *heraldhttp.Config) { c.Streams = l }
}

func withTokenTTL(d time.Duration) envOption {
	return func(c *heraldhttp.Config) { c.TokenTTL = d }
}

// testDBOptions sets the search index's merge threshold from
// HERALD_TEST_MERGE_POSTINGS, so .ci/run can run these tests across many
// merges as well as with the default, which they never reach.
func testDBOptions(o bolt.Options) bolt.Options {
	o.TailMergePostings, _ = strconv.Atoi(os.Getenv("HERALD_TEST_MERGE_POSTINGS"))
	return o
}

// newEnv starts a server on a fresh database in t.TempDir(). At cleanup it
// runs the store's consistency check before closing.
func newEnv(t *testing.T, opts ...envOption) *env {
	t.Helper()
	clock := &testClock{now: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)}
	db := openTestStore(t, filepath.Join(t.TempDir(), "herald.db"), clock.Now)
	return newEnvOn(t, db, clock, opts...)
}

// newEnvOn starts a server on db, an open store whose clock is clock's; it
// owns db from then on. At cleanup it runs the store's consistency check
// before closing.
func newEnvOn(t *testing.T, db testStore, clock *testClock, opts ...envOption) *env {
	t.Helper()
	logs := &syncBuffer{}
	cfg := heraldhttp.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), Now: clock.Now,
		Limits: heraldhttp.Limits{WritesPerAccount: unlimitedWrites}}
	for _, o := range opts {
		o(&cfg)
	}
	handler := heraldhttp.NewServer(db, auth.NewHasher(fastParams, 4), cfg)
	// Served as main serves it, so every test goes through CoalesceWrites.
	srv := httptest.NewUnstartedServer(handler)
	srv.Listener = netquirk.CoalesceWrites(srv.Config, srv.Listener)
	srv.Start()
	t.Cleanup(func() {
		// httptest's Close waits for every request, and streams never end
		// on their own.
		handler.CloseStreams()
		srv.Close()
		if err := checkStore(db); err != nil {
			t.Errorf("store check: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("close db: %v", err)
		}
	})
	return &env{t: t, URL: srv.URL, DB: db, Clock: clock, Logs: logs, Server: handler, HTTP: srv}
}

// makeAdmin gives email's account the administrator role, as the operator
// does on the server's machine (herald admin grant).
func (e *env) makeAdmin(email string) {
	e.t.Helper()
	ctx := context.Background()
	u, err := e.DB.UserByEmail(ctx, email)
	if err != nil {
		e.t.Fatal(err)
	}
	admin := true
	if _, err := e.DB.UpdateAccount(ctx, model.ByServer(), u.ID, model.AccountUpdate{Admin: &admin}); err != nil {
		e.t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer safe for the server's concurrent log writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// response is a finished HTTP exchange with its body read.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map, failing the test if it is not
// a JSON object.
func (r *response) JSON(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

// request is one HTTP request to send; zero fields are omitted.
type request struct {
	Method      string
	Path        string
	Token       string
	ContentType string
	Body        string
	Header      http.Header
}

// do sends req and reads the whole response.
func (e *env) do(req request) *response {
	e.t.Helper()
	var body io.Reader
	if req.Body != "" {
		body = strings.NewReader(req.Body)
	}
	hr, err := http.NewRequest(req.Method, e.URL+req.Path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, vs := range req.Header {
		hr.Header[k] = vs
	}
	if req.ContentType != "" {
		hr.Header.Set("Content-Type", req.ContentType)
	}
	if req.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+req.Token)
	}
	res, err := http.DefaultClient.Do(hr)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	out := &response{Status: res.StatusCode, Header: res.Header, Body: b}
	e.checkContract(hr, req.Body, out)
	return out
}

// jsonBody encodes v as a JSON request body.
func jsonBody(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// formBody encodes fields as application/x-www-form-urlencoded.
func formBody(fields map[string]string) string {
	v := url.Values{}
	for k, s := range fields {
		v.Set(k, s)
	}
	return v.Encode()
}

// multipartBody encodes fields as multipart/form-data and returns the body
// with its Content-Type (which carries the boundary).
func multipartBody(t *testing.T, fields map[string]string) (body, contentType string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range fields {
		if err := mw.WriteField(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.String(), mw.FormDataContentType()
}

// register creates an account over HTTP and returns its token.
func (e *env) register(email, password string) string {
	e.t.Helper()
	res := e.do(request{Method: "POST", Path: "/api/register", ContentType: "application/json",
		Body: jsonBody(e.t, map[string]string{"email": email, "password": password})})
	if res.Status != http.StatusCreated {
		e.t.Fatalf("register %s: status %d: %s", email, res.Status, res.Body)
	}
	return res.JSON(e.t)["token"].(string)
}

// login returns a new token for existing credentials.
func (e *env) login(email, password string) string {
	e.t.Helper()
	res := e.do(request{Method: "POST", Path: "/api/login", ContentType: "application/json",
		Body: jsonBody(e.t, map[string]string{"username": email, "password": password})})
	if res.Status != http.StatusOK {
		e.t.Fatalf("login %s: status %d: %s", email, res.Status, res.Body)
	}
	return res.JSON(e.t)["token"].(string)
}

// post creates a message and returns its decoded JSON.
func (e *env) post(token, content string) map[string]any {
	e.t.Helper()
	res := e.do(request{Method: "POST", Path: "/api/messages", Token: token, ContentType: "application/json",
		Body: jsonBody(e.t, map[string]string{"content": content})})
	if res.Status != http.StatusCreated {
		e.t.Fatalf("post message: status %d: %s", res.Status, res.Body)
	}
	return res.JSON(e.t)
}

// counts reads the store's record counts, to prove a refused request
// changed nothing.
func (e *env) counts() bolt.Counts {
	e.t.Helper()
	c, err := storeCounts(e.DB)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// assertProblem checks that res is an RFC 9457 problem with the given status,
// and returns its decoded body.
func assertProblem(t *testing.T, res *response, status int) map[string]any {
	t.Helper()
	if res.Status != status {
		t.Fatalf("status = %d, want %d; body: %s", res.Status, status, res.Body)
	}
	if got, want := res.Header.Get("Content-Type"), "application/problem+json"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	p := res.JSON(t)
	if got, want := p["status"], float64(status); got != want {
		t.Errorf("problem status = %v, want %v", got, want)
	}
	if got, want := p["title"], http.StatusText(status); got != want {
		t.Errorf("problem title = %v, want %q", got, want)
	}
	if _, ok := p["type"].(string); !ok {
		t.Errorf("problem has no type: %s", res.Body)
	}
	return p
}

// violationPaths lists the propertyPath of each violation in a problem.
func violationPaths(p map[string]any) []string {
	vs, _ := p["violations"].([]any)
	var out []string
	for _, v := range vs {
		if m, ok := v.(map[string]any); ok {
			if s, ok := m["propertyPath"].(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
