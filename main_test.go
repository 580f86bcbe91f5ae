package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/bolt"
)

// runMainEnv makes the test binary act as herald itself: TestMain calls
// main(), which exits. The signal tests start os.Args[0] with it set, so they
// exercise the real signal handling of the real entry point.
const runMainEnv = "HERALD_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return // not reached: main exits
	}
	code := m.Run()
	stopTestPostgres()
	os.Exit(code)
}

// Bounds on every wait, so a broken shutdown fails the test instead of
// hanging it.
const (
	startTimeout = 10 * time.Second
	stopTimeout  = 15 * time.Second
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader in different
// goroutines: run's logger writes while the test polls.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// environ returns a getenv over a fixed set of variables. GOMEMLIMIT reads
// as "off" unless a test sets it: run would otherwise put its soft memory
// limit on the whole test process.
func environ(vars map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := vars[k]; ok || k != "GOMEMLIMIT" {
			return v
		}
		return "off"
	}
}

// instance is one run() in a goroutine.
type instance struct {
	cancel context.CancelFunc
	stdout *syncBuffer
	stderr *syncBuffer
	done   chan int // receives run's exit status
	addr   string   // from the "listening" log line, once known
}

// start calls run in a goroutine. If the test ends without stopping it, the
// cleanup does.
func start(t *testing.T, args []string, vars map[string]string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{cancel: cancel, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan int, 1)}
	go func() { in.done <- run(ctx, args, environ(vars), strings.NewReader(""), in.stdout, in.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-in.done:
			in.done <- code
		case <-time.After(stopTimeout):
			t.Errorf("run did not return within %v of cancel", stopTimeout)
		}
	})
	return in
}

var listeningRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

// waitListening polls the log for the "listening" line and returns the
// address run bound.
func waitListening(t *testing.T, logs *syncBuffer, exited chan int) string {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		if m := listeningRE.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
		select {
		case code := <-exited:
			exited <- code // for stop and the cleanup
			t.Fatalf("herald exited with %d before listening; log:\n%s", code, logs)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("no listening line within %v; log:\n%s", startTimeout, logs)
	return ""
}

// startListening starts run and waits until it serves.
func startListening(t *testing.T, args []string, vars map[string]string) *instance {
	t.Helper()
	in := start(t, args, vars)
	in.addr = waitListening(t, in.stderr, in.done)
	return in
}

// stop cancels run's context and returns its exit status.
func (in *instance) stop(t *testing.T) int {
	t.Helper()
	in.cancel()
	select {
	case code := <-in.done:
		in.done <- code // for the cleanup
		return code
	case <-time.After(stopTimeout):
		t.Fatalf("run did not return within %v of cancel; log:\n%s", stopTimeout, in.stderr)
		return -1
	}
}

// wait returns run's exit status when it ends by itself.
func (in *instance) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-in.done:
		in.done <- code
		return code
	case <-time.After(stopTimeout):
		t.Fatalf("run did not return within %v; log:\n%s", stopTimeout, in.stderr)
		return -1
	}
}

func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// call sends a JSON request (body may be nil) and returns the response with
// its body read.
func call(t *testing.T, c *http.Client, method, url, token string, body any) (*http.Response, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return resp, b
}

// callStatus is call, failing the test unless the status is want; it
// decodes the body into v when v is not nil.
func callStatus(t *testing.T, c *http.Client, method, url, token string, body any, want int, v any) http.Header {
	t.Helper()
	resp, b := call(t, c, method, url, token, body)
	if got := resp.StatusCode; got != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, url, got, want, b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, url, b, err)
		}
	}
	return resp.Header
}

type tokenResponse struct {
	ID    uint64 `json:"id"`
	Email string `json:"email"`
	Token string `json:"token"`
}

type messageResponse struct {
	ID      uint64 `json:"id"`
	Content string `json:"content"`
	User    struct {
		Email string `json:"email"`
	} `json:"user"`
}

// checkDB opens the database file after a run, proving run released it, and
// runs bbolt's consistency check.
func checkDB(t *testing.T, path string) bolt.Counts {
	t.Helper()
	db, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatalf("reopening %s after run: %v", path, err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		t.Errorf("tx.Check: %v", err)
	}
	counts, err := db.Counts()
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

func TestRun(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "herald.db")
	vars := map[string]string{"HERALD_ADDR": "127.0.0.1:0", "HERALD_DB": dbPath, "HERALD_HASH_CONCURRENCY": "2"}
	const (
		email    = "ada@example.com"
		password = "Sup3r-Secret-Passw0rd"
		content  = "hello from the end-to-end test"
	)
	c := newClient(t)

	in := startListening(t, nil, vars)
	base := "http://" + in.addr
	if host, port, err := net.SplitHostPort(in.addr); err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("listening on %q, want 127.0.0.1 and a real port (err %v)", in.addr, err)
	}
	if !strings.Contains(in.stderr.String(), "db="+dbPath) {
		t.Errorf("listening line does not name the database %s; log:\n%s", dbPath, in.stderr)
	}

	// Health.
	resp, body := call(t, c, http.MethodGet, base+"/healthz", "", nil)
	if got, want := resp.StatusCode, http.StatusOK; got != want {
		t.Fatalf("GET /healthz: status %d, want %d", got, want)
	}
	if got, want := resp.Header.Get("Content-Type"), "application/json"; !strings.HasPrefix(got, want) {
		t.Errorf("GET /healthz: Content-Type %q, want %q", got, want)
	}
	var health map[string]string
	if err := json.Unmarshal(body, &health); err != nil {
		t.Fatalf("GET /healthz: %s: %v", body, err)
	}
	if got, want := health["status"], "ok"; got != want || len(health) != 1 {
		t.Errorf("GET /healthz = %s, want {\"status\":\"ok\"}", body)
	}

	// Register, log in, post.
	var reg tokenResponse
	callStatus(t, c, http.MethodPost, base+"/api/register", "", map[string]string{"email": email, "password": password}, http.StatusCreated, &reg)
	if got, want := reg.Email, email; got != want {
		t.Errorf("registered e-mail %q, want %q", got, want)
	}
	var login tokenResponse
	callStatus(t, c, http.MethodPost, base+"/api/login", "", map[string]string{"username": "ADA@example.com", "password": password}, http.StatusOK, &login)
	if login.Token == "" || login.Token == reg.Token {
		t.Errorf("login token %q, want a new one (register gave %q)", login.Token, reg.Token)
	}
	var msg messageResponse
	h := callStatus(t, c, http.MethodPost, base+"/api/messages", login.Token, map[string]string{"content": content}, http.StatusCreated, &msg)
	if got, want := h.Get("Location"), fmt.Sprintf("/api/messages/%d", msg.ID); got != want {
		t.Errorf("Location = %q, want %q", got, want)
	}
	callStatus(t, c, http.MethodGet, base+"/api/me", reg.Token, nil, http.StatusOK, nil)
	callStatus(t, c, http.MethodGet, base+"/api/me", "", nil, http.StatusUnauthorized, nil)

	// Stop.
	if got, want := in.stop(t), 0; got != want {
		t.Fatalf("run returned %d, want %d; log:\n%s", got, want, in.stderr)
	}
	logs := in.stderr.String()
	for _, want := range []string{"msg=\"shutting down\"", "msg=\"stopped cleanly\""} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, logs)
		}
	}
	if got := in.stdout.String(); got != "" {
		t.Errorf("stdout = %q, want nothing (logs go to stderr)", got)
	}
	if _, err := os.Stat(dbPath); err != nil {
		t.Fatalf("database file: %v", err)
	}
	if got, want := checkDB(t, dbPath), (bolt.Counts{Users: 1, Tokens: 2, Messages: 1}); got != want {
		t.Errorf("after run: %+v, want %+v", got, want)
	}

	t.Run("AccessLog", func(t *testing.T) {
		for _, want := range []string{
			"method=GET path=/healthz status=200",
			"method=POST path=/api/register status=201",
			"method=POST path=/api/login status=200",
			"method=POST path=/api/messages status=201",
			"method=GET path=/api/me status=200",
			"method=GET path=/api/me status=401",
		} {
			re := regexp.MustCompile(`(?m)^.*msg=request .*` + regexp.QuoteMeta(want) + `\b`)
			if !re.MatchString(logs) {
				t.Errorf("no access log line with msg=request %s; log:\n%s", want, logs)
			}
		}
		for name, secret := range map[string]string{"password": password, "register token": reg.Token, "login token": login.Token, "token body": login.Token[len("herald_"):]} {
			if strings.Contains(logs, secret) {
				t.Errorf("log contains the %s %q", name, secret)
			}
		}
	})

	t.Run("Restart", func(t *testing.T) {
		in := startListening(t, nil, vars)
		base := "http://" + in.addr
		callStatus(t, c, http.MethodGet, base+"/healthz", "", nil, http.StatusOK, nil)
		// Tokens issued before the restart still work.
		var me tokenResponse
		callStatus(t, c, http.MethodGet, base+"/api/me", reg.Token, nil, http.StatusOK, &me)
		if got, want := me.Email, email; got != want {
			t.Errorf("GET /api/me e-mail %q, want %q", got, want)
		}
		var again tokenResponse
		callStatus(t, c, http.MethodPost, base+"/api/login", "", map[string]string{"username": email, "password": password}, http.StatusOK, &again)
		var page struct {
			Items []messageResponse `json:"items"`
			Next  *string           `json:"next"`
		}
		callStatus(t, c, http.MethodGet, base+"/api/messages", again.Token, nil, http.StatusOK, &page)
		if got, want := len(page.Items), 1; got != want {
			t.Fatalf("GET /api/messages: %d items, want %d", got, want)
		}
		if got, want := page.Items[0], msg; got != want {
			t.Errorf("message after restart = %+v, want %+v", got, want)
		}
		if got, want := page.Items[0].User.Email, email; got != want {
			t.Errorf("owner after restart = %q, want %q", got, want)
		}
		if page.Next != nil {
			t.Errorf("next = %q, want null", *page.Next)
		}
		var got messageResponse
		callStatus(t, c, http.MethodGet, base+fmt.Sprintf("/api/messages/%d", msg.ID), again.Token, nil, http.StatusOK, &got)
		if got != msg {
			t.Errorf("GET message after restart = %+v, want %+v", got, msg)
		}
		if got, want := in.stop(t), 0; got != want {
			t.Fatalf("second run returned %d, want %d; log:\n%s", got, want, in.stderr)
		}
		if got, want := checkDB(t, dbPath), (bolt.Counts{Users: 1, Tokens: 3, Messages: 1}); got != want {
			t.Errorf("after restart: %+v, want %+v", got, want)
		}
	})
}

func TestRunFlagBeatsVariable(t *testing.T) {
	dir := t.TempDir()
	envDB, flagDB := filepath.Join(dir, "env.db"), filepath.Join(dir, "flag.db")
	vars := map[string]string{"HERALD_ADDR": "127.0.0.1:1", "HERALD_DB": envDB, "HERALD_LOG_FORMAT": "xml"}
	in := startListening(t, []string{"--addr", "127.0.0.1:0", "--db", flagDB, "--log-format=text"}, vars)
	if host, port, err := net.SplitHostPort(in.addr); err != nil || host != "127.0.0.1" || port == "0" || port == "1" {
		t.Fatalf("listening on %q, want the flag's 127.0.0.1:0 resolved to a real port", in.addr)
	}
	callStatus(t, newClient(t), http.MethodGet, "http://"+in.addr+"/healthz", "", nil, http.StatusOK, nil)
	if got, want := in.stop(t), 0; got != want {
		t.Fatalf("run returned %d, want %d; log:\n%s", got, want, in.stderr)
	}
	if _, err := os.Stat(flagDB); err != nil {
		t.Errorf("flag's database: %v", err)
	}
	if _, err := os.Stat(envDB); !os.IsNotExist(err) {
		t.Errorf("variable's database %s: err = %v, want it never created", envDB, err)
	}
}

func TestRunJSONLog(t *testing.T) {
	in := start(t, []string{"--log-format", "json", "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "herald.db")}, nil)
	var addr string
	deadline := time.Now().Add(startTimeout)
	for addr == "" && time.Now().Before(deadline) {
		for line := range strings.Lines(in.stderr.String()) {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("log line %q is not JSON: %v", line, err)
			}
			if rec["msg"] == "listening" {
				addr, _ = rec["addr"].(string)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if addr == "" {
		t.Fatalf("no JSON listening line; log:\n%s", in.stderr)
	}
	callStatus(t, newClient(t), http.MethodGet, "http://"+addr+"/healthz", "", nil, http.StatusOK, nil)
	if got, want := in.stop(t), 0; got != want {
		t.Fatalf("run returned %d, want %d", got, want)
	}
	if !strings.Contains(in.stderr.String(), `"msg":"request"`) {
		t.Errorf("no JSON access log line; log:\n%s", in.stderr)
	}
}

// flagNames is every flag herald documents, with its variable.
var flagNames = map[string]string{
	"addr":             "HERALD_ADDR",
	"db":               "HERALD_DB",
	"token-ttl":        "HERALD_TOKEN_TTL",
	"max-body":         "HERALD_MAX_BODY",
	"hash-concurrency": "HERALD_HASH_CONCURRENCY",
	"shutdown-timeout": "HERALD_SHUTDOWN_TIMEOUT",
	"log-format":       "HERALD_LOG_FORMAT",
	"hash-queue":       "HERALD_HASH_QUEUE",
	"memory-limit":     "HERALD_MEMORY_LIMIT",
	"procs":            "HERALD_PROCS",
	"admins":           "HERALD_ADMINS",
	"retain":           "HERALD_RETAIN",
	"metrics-addr":     "HERALD_METRICS_ADDR",
	"pprof":            "HERALD_PPROF",
	"trusted-proxies":  "HERALD_TRUSTED_PROXIES",

	"login-failures-per-account": "HERALD_LOGIN_FAILURES_PER_ACCOUNT",
	"login-failures-per-address": "HERALD_LOGIN_FAILURES_PER_ADDRESS",
	"registrations-per-address":  "HERALD_REGISTRATIONS_PER_ADDRESS",
}

func TestRunHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-help", "-h", "help"} {
		t.Run(arg, func(t *testing.T) {
			var stdout, stderr syncBuffer
			// Even a bad variable does not stop --help.
			code := run(context.Background(), []string{arg}, environ(map[string]string{"HERALD_TOKEN_TTL": "soon"}), strings.NewReader(""), &stdout, &stderr)
			if got, want := code, 0; got != want {
				t.Errorf("run(%s) = %d, want %d", arg, got, want)
			}
			out := stdout.String()
			if !strings.Contains(out, "Usage: herald") {
				t.Errorf("stdout lacks \"Usage: herald\":\n%s", out)
			}
			for flag, env := range flagNames {
				if !strings.Contains(out, "--"+flag+" ") {
					t.Errorf("help does not list --%s:\n%s", flag, out)
				}
				if !strings.Contains(out, env) {
					t.Errorf("help does not name %s:\n%s", env, out)
				}
			}
			if got := stderr.String(); got != "" {
				t.Errorf("stderr = %q, want empty", got)
			}
		})
	}
}

// TestConfigurationListsEveryFlag: the table of docs/configuration.md has
// a row for every flag --help lists, with the flag's variable.
func TestConfigurationListsEveryFlag(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	var help, errOut syncBuffer
	if code := run(context.Background(), []string{"--help"}, environ(nil), strings.NewReader(""), &help, &errOut); code != 0 {
		t.Fatalf("--help = %d, %s", code, errOut.String())
	}
	flags := regexp.MustCompile(`(?m)^  --([a-z-]+)[^\n]*\n[^\n]*env (HERALD_[A-Z_]+)\)`).FindAllStringSubmatch(help.String(), -1)
	if len(flags) < 20 {
		t.Fatalf("found %d flags with variables in --help, want every one:\n%s", len(flags), help.String())
	}
	for _, f := range flags {
		if row := fmt.Sprintf("| `--%s` | `%s` |", f[1], f[2]); !strings.Contains(string(page), row) {
			t.Errorf("docs/configuration.md's table has no row beginning %s", row)
		}
	}
}

// TestRunHelpOnACommand: "herald help CMD" is "herald CMD --help".
func TestRunHelpOnACommand(t *testing.T) {
	for _, cmd := range []string{"serve", "migrate", "admin", "check", "backup", "compact", "version"} {
		var helpOut, helpErr, flagOut, flagErr syncBuffer
		getenv := environ(nil)
		args := []string{"help", cmd, "more"}
		helpCode := run(context.Background(), args[:2], getenv, strings.NewReader(""), &helpOut, &helpErr)
		if args[2] != "more" {
			t.Errorf("help %s wrote %q into its caller's arguments", cmd, args[2])
		}
		flagCode := run(context.Background(), []string{cmd, "--help"}, getenv, strings.NewReader(""), &flagOut, &flagErr)
		if helpCode != 0 || flagCode != 0 || helpOut.String() != flagOut.String() || helpErr.String() != flagErr.String() ||
			!strings.Contains(helpOut.String()+helpErr.String(), "Usage: herald") {
			t.Errorf("help %s = %d, %q, %q; %s --help = %d, %q, %q; want both 0 and the same usage",
				cmd, helpCode, helpOut.String(), helpErr.String(), cmd, flagCode, flagOut.String(), flagErr.String())
		}
	}
}

func TestRunUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		vars map[string]string
		want string
	}{
		{"UnknownFlag", []string{"--bogus"}, nil, "flag provided but not defined: --bogus"},
		{"BadDuration", []string{"--token-ttl", "soon"}, nil, `invalid value "soon" for flag --token-ttl: "soon" is not a duration: write it like 30d, 12h or 1h30m`},
		{"Positional", []string{"extra"}, nil, `unexpected argument "extra"`},
		{"PositionalAfterServe", []string{"serve", "extra"}, nil, `unexpected argument "extra"`},
		{"BadFlagValue", []string{"--max-body", "lots"}, nil, "max-body"},
		{"BadVariable", nil, map[string]string{"HERALD_MAX_BODY": "lots"}, "HERALD_MAX_BODY"},
		{"Invalid", []string{"--log-format", "xml"}, nil, "--log-format (HERALD_LOG_FORMAT) must be text or json"},
		{"ProfilerWithoutListener", []string{"--pprof"}, nil, "--pprof (HERALD_PPROF) needs --metrics-addr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr syncBuffer
			code := run(context.Background(), tt.args, environ(tt.vars), strings.NewReader(""), &stdout, &stderr)
			if got, want := code, 2; got != want {
				t.Errorf("run(%q) = %d, want %d", tt.args, got, want)
			}
			if got := stderr.String(); !strings.HasPrefix(got, "herald: ") || !strings.Contains(got, tt.want) {
				t.Errorf("stderr = %q, want \"herald: ...%s...\"", got, tt.want)
			}
			if got := stdout.String(); got != "" {
				t.Errorf("stdout = %q, want empty", got)
			}
		})
	}
}

func TestRunDatabaseLocked(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "herald.db")
	db, err := bolt.Open(dbPath, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	in := start(t, []string{"--addr", "127.0.0.1:0", "--db", dbPath}, nil)
	if got, want := in.wait(t), 1; got != want {
		t.Errorf("run with a locked database = %d, want %d", got, want)
	}
	logs := in.stderr.String()
	if !strings.Contains(logs, "the database "+dbPath+" is in use by another process") {
		t.Errorf("log does not say the database is in use:\n%s", logs)
	}
	if strings.Contains(logs, "msg=listening") {
		t.Errorf("run listened although it had no database:\n%s", logs)
	}
}

// process is herald started as a separate process through the real main().
type process struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
	err    error // cmd.Wait's result, once exited is closed
	addr   string
	dbPath string
}

func startProcess(t *testing.T) *process {
	t.Helper()
	return startProcessOn(t, filepath.Join(t.TempDir(), "herald.db"))
}

// startProcessOn starts herald on the database at dbPath.
func startProcessOn(t *testing.T, dbPath string) *process {
	t.Helper()
	return startProcessEnv(t, dbPath)
}

// startProcessEnv starts herald on the database at dbPath (a file or a
// URL), with env's variables (NAME=value) besides those every process
// gets.
func startProcessEnv(t *testing.T, dbPath string, env ...string) *process {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("no SIGTERM on Windows")
	}
	p := &process{stderr: &syncBuffer{}, exited: make(chan struct{}), dbPath: dbPath}
	p.cmd = exec.Command(os.Args[0]) // no arguments: main reads os.Args[1:] as herald flags
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERALD_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	// Writes unlimited: these processes are flooded by design, from one
	// account; the limit is tested in http (TestWriteLimits).
	p.cmd.Env = append(p.cmd.Env, runMainEnv+"=1", "HERALD_ADDR=127.0.0.1:0", "HERALD_DB="+p.dbPath, "HERALD_HASH_CONCURRENCY=1",
		"HERALD_WRITES_PER_ACCOUNT=1000000000/1ns")
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stderr, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})

	deadline := time.Now().Add(startTimeout)
	for p.addr == "" {
		if m := listeningRE.FindStringSubmatch(p.stderr.String()); m != nil {
			p.addr = m[1]
			break
		}
		select {
		case <-p.exited:
			t.Fatalf("herald exited before listening: %v; output:\n%s", p.err, p.stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listening line within %v; output:\n%s", startTimeout, p.stderr)
		}
	}
	return p
}

// waitExit waits, bounded, for the process to end and requires status 0.
func (p *process) waitExit(t *testing.T) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		t.Fatalf("herald still running %v after the signal; output:\n%s", stopTimeout, p.stderr)
	}
	if p.err != nil {
		t.Fatalf("herald exited with %v, want status 0; output:\n%s", p.err, p.stderr)
	}
	if got, want := p.cmd.ProcessState.ExitCode(), 0; got != want {
		t.Errorf("exit status %d, want %d", got, want)
	}
	if out := p.stderr.String(); !strings.Contains(out, `msg="stopped cleanly"`) {
		t.Errorf("no \"stopped cleanly\" line; output:\n%s", out)
	}
}

// waitLog waits, bounded, until the process has logged s.
func (p *process) waitLog(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(startTimeout)
	for !strings.Contains(p.stderr.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in the log within %v; output:\n%s", s, startTimeout, p.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestSignalInterrupt(t *testing.T) {
	p := startProcess(t)
	callStatus(t, newClient(t), http.MethodGet, "http://"+p.addr+"/healthz", "", nil, http.StatusOK, nil)
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	p.waitExit(t)
	checkDB(t, p.dbPath)
}
