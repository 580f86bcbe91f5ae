// Package apitest runs Herald's HTTP server over a real store, reached
// through real HTTP, for the tests of package http and of the web client
// (http/web): the store under test (bbolt, or PostgreSQL with
// HERALD_TEST_STORE=postgres), a settable clock, requests whose every
// exchange is checked against openapi.json, and the calls tests make
// again and again (register, log in, post...). It is a package of its own
// so that both packages' tests share one harness; only tests import it.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
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

// FastParams keep argon2id real but cheap, so tests that register many users
// stay quick under -race. Production parameters are covered in auth/.
var FastParams = auth.Params{MemoryKiB: 64, Iterations: 1, Parallelism: 1, SaltLen: 16, KeyLen: 32}

// Clock is a settable clock shared by the store and the server, so tests
// can expire tokens without sleeping.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Epoch is where every test's clock starts.
var Epoch = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

// NewClock returns a clock at Epoch.
func NewClock() *Clock { return &Clock{now: Epoch} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Env is a running Herald over a real store (see store.go), reached
// through real HTTP.
type Env struct {
	T     *testing.T // the test the server is for
	URL   string
	DB    Store
	Clock *Clock
	Logs  *SyncBuffer
	// Server and HTTP are the handler and the httptest server around it,
	// for tests that stop streams or reach the connections.
	Server *heraldhttp.Server
	HTTP   *httptest.Server
}

// Option changes the server's configuration.
type Option func(*heraldhttp.Config)

// WithMaxBody sets the largest request body.
func WithMaxBody(n int64) Option {
	return func(c *heraldhttp.Config) { c.MaxBodyBytes = n }
}

// WithLimits sets the limits; a zero WritesPerAccount keeps New's.
func WithLimits(l heraldhttp.Limits) Option {
	return func(c *heraldhttp.Config) {
		if l.WritesPerAccount == (auth.Rate{}) {
			l.WritesPerAccount = c.Limits.WritesPerAccount
		}
		c.Limits = l
	}
}

// UnlimitedWrites opens the write limit wide: tests that write a lot from
// one account test other things, on a clock that stands still. The limit
// itself is tested with its default (TestWriteLimits).
var UnlimitedWrites = auth.Rate{Burst: 1 << 30, Every: time.Nanosecond}

// WithStreams sets the live streams' limits.
func WithStreams(l stream.Limits) Option {
	return func(c *heraldhttp.Config) { c.Streams = l }
}

// WithMailer has the server send e-mail with m, its links under
// publicURL.
func WithMailer(m heraldhttp.Mailer, publicURL string) Option {
	return func(c *heraldhttp.Config) { c.Mailer, c.PublicURL = m, publicURL }
}

// WithTokenTTL sets the lifetime of issued tokens.
func WithTokenTTL(d time.Duration) Option {
	return func(c *heraldhttp.Config) { c.TokenTTL = d }
}

// DBOptions sets the search index's merge threshold from
// HERALD_TEST_MERGE_POSTINGS, so .ci/run can run these tests across many
// merges as well as with the default, which they never reach.
func DBOptions(o bolt.Options) bolt.Options {
	o.TailMergePostings, _ = strconv.Atoi(os.Getenv("HERALD_TEST_MERGE_POSTINGS"))
	return o
}

// New starts a server on a fresh database in t.TempDir(). At cleanup it
// runs the store's consistency check before closing.
func New(t *testing.T, opts ...Option) *Env {
	t.Helper()
	clock := NewClock()
	db := OpenStore(t, filepath.Join(t.TempDir(), "herald.db"), clock.Now)
	return NewOn(t, db, clock, opts...)
}

// NewOn starts a server on db, an open store whose clock is clock's; it
// owns db from then on. At cleanup it runs the store's consistency check
// before closing.
func NewOn(t *testing.T, db Store, clock *Clock, opts ...Option) *Env {
	t.Helper()
	logs := &SyncBuffer{}
	cfg := heraldhttp.Config{Logger: slog.New(slog.NewTextHandler(logs, nil)), Now: clock.Now,
		Limits: heraldhttp.Limits{WritesPerAccount: UnlimitedWrites}}
	for _, o := range opts {
		o(&cfg)
	}
	handler := heraldhttp.NewServer(db, auth.NewHasher(FastParams, 4), cfg)
	stopFollowing := followSettings(t, handler)
	// Served as main serves it, so every test goes through CoalesceWrites.
	srv := httptest.NewUnstartedServer(handler)
	srv.Listener = netquirk.CoalesceWrites(srv.Config, srv.Listener)
	srv.Start()
	t.Cleanup(func() {
		// httptest's Close waits for every request, and streams never end
		// on their own.
		handler.CloseStreams()
		srv.Close()
		stopFollowing()
		if err := CheckStore(db); err != nil {
			t.Errorf("store check: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("close db: %v", err)
		}
	})
	return &Env{T: t, URL: srv.URL, DB: db, Clock: clock, Logs: logs, Server: handler, HTTP: srv}
}

// followSettings has handler follow the settings its store holds, as
// main has it do; the function returned stops that, before the store
// closes.
func followSettings(t *testing.T, handler *heraldhttp.Server) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := handler.FollowSettings(ctx)
	if err != nil {
		cancel()
		t.Fatalf("reading the settings: %v", err)
	}
	return func() { cancel(); <-stopped }
}

// MakeAdmin gives email's account the administrator role, as the operator
// does on the server's machine (herald admin grant).
func (e *Env) MakeAdmin(email string) {
	e.T.Helper()
	ctx := context.Background()
	u, err := e.DB.UserByEmail(ctx, email)
	if err != nil {
		e.T.Fatal(err)
	}
	admin := true
	if _, err := e.DB.UpdateAccount(ctx, model.ByServer(), u.ID, model.AccountUpdate{Admin: &admin}); err != nil {
		e.T.Fatal(err)
	}
}

// SyncBuffer is a bytes.Buffer safe for the server's concurrent log writes.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Response is a finished HTTP exchange with its body read.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map, failing the test if it is not
// a JSON object.
func (r *Response) JSON(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v\n%s", err, r.Body)
	}
	return m
}

// Request is one HTTP request to send; zero fields are omitted.
type Request struct {
	Method      string
	Path        string
	Token       string
	ContentType string
	Body        string
	Header      http.Header
}

// Do sends req and reads the whole response, and reports (without
// stopping the test) an exchange that breaks openapi.json.
func (e *Env) Do(req Request) *Response {
	e.T.Helper()
	var body io.Reader
	if req.Body != "" {
		body = strings.NewReader(req.Body)
	}
	hr, err := http.NewRequest(req.Method, e.URL+req.Path, body)
	if err != nil {
		e.T.Fatal(err)
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
		e.T.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.T.Fatal(err)
	}
	out := &Response{Status: res.StatusCode, Header: res.Header, Body: b}
	e.checkContract(hr, req.Body, out)
	return out
}

// JSONBody encodes v as a JSON request body.
func JSONBody(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// FormBody encodes fields as application/x-www-form-urlencoded.
func FormBody(fields map[string]string) string {
	v := url.Values{}
	for k, s := range fields {
		v.Set(k, s)
	}
	return v.Encode()
}

// MultipartBody encodes fields as multipart/form-data and returns the body
// with its Content-Type (which carries the boundary).
func MultipartBody(t *testing.T, fields map[string]string) (body, contentType string) {
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

// Register creates an account over HTTP and returns its token.
func (e *Env) Register(email, password string) string {
	e.T.Helper()
	res := e.Do(Request{Method: "POST", Path: "/api/register", ContentType: "application/json",
		Body: JSONBody(e.T, map[string]string{"email": email, "password": password})})
	if res.Status != http.StatusCreated {
		e.T.Fatalf("register %s: status %d: %s", email, res.Status, res.Body)
	}
	return res.JSON(e.T)["token"].(string)
}

// Login returns a new token for existing credentials.
func (e *Env) Login(email, password string) string {
	e.T.Helper()
	res := e.Do(Request{Method: "POST", Path: "/api/login", ContentType: "application/json",
		Body: JSONBody(e.T, map[string]string{"username": email, "password": password})})
	if res.Status != http.StatusOK {
		e.T.Fatalf("login %s: status %d: %s", email, res.Status, res.Body)
	}
	return res.JSON(e.T)["token"].(string)
}

// Post creates a message and returns its decoded JSON.
func (e *Env) Post(token, content string) map[string]any {
	e.T.Helper()
	res := e.Do(Request{Method: "POST", Path: "/api/messages", Token: token, ContentType: "application/json",
		Body: JSONBody(e.T, map[string]string{"content": content})})
	if res.Status != http.StatusCreated {
		e.T.Fatalf("post message: status %d: %s", res.Status, res.Body)
	}
	return res.JSON(e.T)
}

// Counts reads the store's record counts, to prove a refused request
// changed nothing.
func (e *Env) Counts() bolt.Counts {
	e.T.Helper()
	c, err := StoreCounts(e.DB)
	if err != nil {
		e.T.Fatal(err)
	}
	return c
}

// AssertProblem checks that res is an RFC 9457 problem with the given status,
// and returns its decoded body.
func AssertProblem(t *testing.T, res *Response, status int) map[string]any {
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

// ViolationPaths lists the propertyPath of each violation in a problem.
func ViolationPaths(p map[string]any) []string {
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

// Serve serves an open database with cfg, letting tune adjust the
// http.Server before it starts, for tests that restart the server or need
// its timeouts or connections; stop ends it and closes the database.
func Serve(t *testing.T, db Store, cfg heraldhttp.Config, tune func(*http.Server)) (e *Env, stop func()) {
	t.Helper()
	return ServeOn(t, nil, db, cfg, tune)
}

// ServeOn is Serve on listener l, or on one of httptest's when l is nil.
func ServeOn(t *testing.T, l net.Listener, db Store, cfg heraldhttp.Config, tune func(*http.Server)) (e *Env, stop func()) {
	t.Helper()
	if cfg.Limits.WritesPerAccount == (auth.Rate{}) {
		cfg.Limits.WritesPerAccount = UnlimitedWrites
	}
	handler := heraldhttp.NewServer(db, auth.NewHasher(FastParams, 2), cfg)
	stopFollowing := followSettings(t, handler)
	srv := httptest.NewUnstartedServer(handler)
	if l != nil {
		srv.Listener.Close()
		srv.Listener = l
	}
	if tune != nil {
		tune(srv.Config)
	}
	srv.Listener = netquirk.CoalesceWrites(srv.Config, srv.Listener)
	srv.Start()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			handler.CloseStreams()
			srv.Close()
			stopFollowing()
			if err := db.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return &Env{T: t, URL: srv.URL, DB: db, Server: handler, HTTP: srv}, stop
}

// Patch changes the content of message id.
func (e *Env) Patch(token string, id float64, content string) {
	e.T.Helper()
	res := e.Do(Request{Method: http.MethodPatch, Path: fmt.Sprintf("/api/messages/%d", int(id)), Token: token, ContentType: "application/json", Body: JSONBody(e.T, map[string]string{"content": content})})
	if res.Status != http.StatusOK {
		e.T.Fatalf("PATCH: %d %s", res.Status, res.Body)
	}
}

// Remove deletes message id.
func (e *Env) Remove(token string, id float64) {
	e.T.Helper()
	res := e.Do(Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/messages/%d", int(id)), Token: token})
	if res.Status != http.StatusNoContent {
		e.T.Fatalf("DELETE: %d %s", res.Status, res.Body)
	}
}

// WithRegistration sets who may register.
func WithRegistration(m heraldhttp.Registration) Option {
	return func(c *heraldhttp.Config) { c.Registration = m }
}

// Admin registers email and makes it an administrator on the server's
// machine, returning its token.
func (e *Env) Admin(email string) string {
	e.T.Helper()
	token := e.Register(email, Password)
	e.MakeAdmin(email)
	return token
}

// RegisterWith registers with an invitation code and returns the answer.
func (e *Env) RegisterWith(email, invite string) *Response {
	e.T.Helper()
	fields := map[string]string{"email": email, "password": Password}
	if invite != "" {
		fields["invite"] = invite
	}
	return e.Do(Request{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: JSONBody(e.T, fields)})
}

// Invite makes an invitation through the API and returns its code.
func (e *Env) Invite(admin, body string) map[string]any {
	e.T.Helper()
	if body == "" {
		body = "{}"
	}
	res := e.Do(Request{Method: "POST", Path: "/api/admin/invites", Token: admin, ContentType: "application/json", Body: body})
	if res.Status != http.StatusCreated {
		e.T.Fatalf("create invitation: %d %s", res.Status, res.Body)
	}
	return res.JSON(e.T)
}

// AccountID finds email's account ID through the administration API.
func (e *Env) AccountID(admin, email string) string {
	e.T.Helper()
	res := e.Do(Request{Method: "GET", Path: "/api/admin/users?q=" + url.QueryEscape(email), Token: admin})
	for _, it := range res.JSON(e.T)["items"].([]any) {
		u := it.(map[string]any)
		if strings.EqualFold(u["email"].(string), email) {
			return strconv.FormatFloat(u["id"].(float64), 'f', 0, 64)
		}
	}
	e.T.Fatalf("no account %s in %s", email, res.Body)
	return ""
}

// MakeFirstAdmin makes email's account, with Password, and makes it an
// administrator on the server's machine, as herald admin create does:
// whatever the registration mode.
func (e *Env) MakeFirstAdmin(email string) {
	e.T.Helper()
	ctx := context.Background()
	hash, err := auth.NewHasher(FastParams, 1).Hash(ctx, Password)
	if err != nil {
		e.T.Fatal(err)
	}
	if _, err := e.DB.CreateUser(ctx, &model.User{Email: email, PasswordHash: hash}, model.TokenHash{1}, time.Minute, nil); err != nil {
		e.T.Fatal(err)
	}
	e.MakeAdmin(email)
}

// LoginAttempt logs in and returns the whole answer.
func (e *Env) LoginAttempt(email, password string) *Response {
	e.T.Helper()
	return e.Do(Request{Method: "POST", Path: "/api/login", ContentType: "application/json",
		Body: JSONBody(e.T, map[string]string{"username": email, "password": password})})
}

// MsgID reads a message's id from its JSON.
func MsgID(t *testing.T, m map[string]any) uint64 {
	t.Helper()
	f, ok := m["id"].(float64)
	if !ok || f < 1 || f != float64(uint64(f)) {
		t.Fatalf("message id = %v, want a positive integer", m["id"])
	}
	return uint64(f)
}

// Password is the password of the accounts Admin and MakeFirstAdmin make.
const Password = "correct horse battery"
