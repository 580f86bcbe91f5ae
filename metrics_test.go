package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

var metricsRE = regexp.MustCompile(`msg="metrics listening" addr=(\S+)`)

// TestMetrics serves /metrics on its own listener and checks that a request,
// a login and a write show up, by route pattern and not by raw path.
func TestMetrics(t *testing.T) {
	in := startListening(t, []string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "herald.db")}, nil)
	defer in.stop(t)
	m := metricsRE.FindStringSubmatch(in.stderr.String())
	if m == nil {
		t.Fatalf("no metrics listening line:\n%s", in.stderr)
	}
	c := newClient(t)
	base := "http://" + in.addr
	var reg struct{ Token string }
	callStatus(t, c, "POST", base+"/api/register", "", map[string]string{"email": "ada@example.com", "password": "correct horse battery"}, http.StatusCreated, &reg)
	callStatus(t, c, "POST", base+"/api/login", "", map[string]string{"username": "ada@example.com", "password": "wrong password"}, http.StatusUnauthorized, nil)
	callStatus(t, c, "POST", base+"/api/messages", reg.Token, map[string]string{"content": "counted"}, http.StatusCreated, nil)
	callStatus(t, c, "GET", base+"/api/messages/1", reg.Token, nil, http.StatusOK, nil)

	res, err := c.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	out := string(body)
	for _, want := range []string{
		`herald_http_requests_total{route="/api/messages/:id",method="GET",status="200"} 1`,
		`herald_http_requests_total{route="/api/login",method="POST",status="401"} 1`,
		`herald_http_request_duration_seconds_bucket{route="/api/messages",method="POST",`,
		`herald_logins_total{outcome="failed"} 1`,
		`herald_db_commit_duration_seconds_bucket`,
		`herald_db_size_bytes `,
		`herald_hash_waiting 0`,
		`herald_search_costly_running 0`,
		`herald_search_costly_waiting 0`,
		`go_memstats_`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(out, `route="/api/messages/1"`) {
		t.Errorf("a raw path became a label:\n%s", out)
	}
	// The API listener does not serve metrics, and the profiler is off.
	callStatus(t, c, "GET", base+"/metrics", "", nil, http.StatusNotFound, nil)
	callStatus(t, c, "GET", "http://"+m[1]+"/debug/pprof/", "", nil, http.StatusNotFound, nil)
}

// TestMetricsMethodsFromClosedSet: net/http accepts any token as a method,
// so requests with made-up ones, kilobytes long, must not add a series
// each: all of them together add the one series of method "other".
func TestMetricsMethodsFromClosedSet(t *testing.T) {
	in := startListening(t, []string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "herald.db")}, nil)
	defer in.stop(t)
	m := metricsRE.FindStringSubmatch(in.stderr.String())
	if m == nil {
		t.Fatalf("no metrics listening line:\n%s", in.stderr)
	}
	c := newClient(t)
	base := "http://" + in.addr
	scrape := func() string {
		t.Helper()
		res, err := c.Get("http://" + m[1] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
	// Every method the route table serves, HEAD and OPTIONS keep their
	// own label.
	for _, method := range []string{"GET", "HEAD", "OPTIONS"} {
		callStatus(t, c, method, base+"/api/info", "", nil, http.StatusOK, nil)
	}
	callStatus(t, c, "POST", base+"/api/login", "", map[string]string{"username": "nobody@example.com", "password": "wrong password"}, http.StatusUnauthorized, nil)
	callStatus(t, c, "PATCH", base+"/api/messages/1", "", nil, http.StatusUnauthorized, nil)
	callStatus(t, c, "DELETE", base+"/api/me", "", nil, http.StatusUnauthorized, nil)
	before := heraldSeries(scrape())

	var methods []string
	for i := range 200 {
		methods = append(methods, fmt.Sprintf("MADEUP%d", i))
	}
	for i := range 40 {
		methods = append(methods, fmt.Sprintf("%s%d", strings.Repeat("X", 2<<10), i))
	}
	for i := range 5 {
		methods = append(methods, fmt.Sprintf("%s%d", strings.Repeat("Y", 15<<10), i))
	}
	// Methods Go knows but no route serves, and a served one in another
	// case (methods are case-sensitive), are no different.
	methods = append(methods, "PUT", "TRACE", "get", "Post")
	paths := []string{"/api/info", "/api/messages/1", "/api/me"}
	for i, method := range methods {
		callStatus(t, c, method, base+paths[i%len(paths)], "", nil, http.StatusMethodNotAllowed, nil)
	}
	out := scrape()
	after := heraldSeries(out)

	var added []string
	for s := range after {
		if !before[s] {
			added = append(added, s)
		}
	}
	slices.Sort(added)
	want := []string{
		`herald_http_request_duration_seconds{route="unmatched",method="other"}`,
		`herald_http_requests_total{route="unmatched",method="other",status="405"}`,
	}
	if !slices.Equal(added, want) {
		t.Errorf("%d made-up methods added the series\n%s\nwant\n%s", len(methods), truncateLines(added, 10), strings.Join(want, "\n"))
	}
	for s := range before {
		if !after[s] {
			t.Errorf("series %s went away", s)
		}
	}
	if c := fmt.Sprintf(`%s %d`, want[1], len(methods)); !strings.Contains(out, c+"\n") {
		t.Errorf("/metrics lacks %q", c)
	}
	for _, served := range []string{"GET", "HEAD", "OPTIONS", "POST", "PATCH", "DELETE"} {
		if !strings.Contains(out, `method="`+served+`"`) {
			t.Errorf("/metrics has no series of method %s:\n%s", served, strings.Join(slices.Sorted(maps.Keys(after)), "\n"))
		}
	}
}

// heraldSeries returns Herald's series in a /metrics page, a histogram's
// buckets, sum and count as one series: the buckets a histogram shows
// depend on the durations it saw, not on what the labels let a client add.
func heraldSeries(page string) map[string]bool {
	bucket := regexp.MustCompile(`(_bucket|_sum|_count)(\{|$)|,?vmrange="[^"]*"`)
	series := make(map[string]bool)
	for line := range strings.Lines(page) {
		if !strings.HasPrefix(line, "herald_") {
			continue
		}
		name := line[:strings.LastIndexByte(strings.TrimSpace(line), ' ')]
		name = bucket.ReplaceAllStringFunc(name, func(s string) string {
			if strings.HasSuffix(s, "{") {
				return "{"
			}
			return ""
		})
		name = strings.Replace(name, "{,", "{", 1)
		series[name] = true
	}
	return series
}

// truncateLines joins lines, at most n of them, saying how many it left off.
func truncateLines(lines []string, n int) string {
	if len(lines) <= n {
		return strings.Join(lines, "\n")
	}
	return fmt.Sprintf("%s\n... and %d more", strings.Join(lines[:n], "\n"), len(lines)-n)
}

// TestProfiler: --pprof serves Go's profiler on the metrics listener, and
// only there.
func TestProfiler(t *testing.T) {
	in := startListening(t, []string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--pprof", "--db", filepath.Join(t.TempDir(), "herald.db")}, nil)
	defer in.stop(t)
	m := metricsRE.FindStringSubmatch(in.stderr.String())
	if m == nil {
		t.Fatalf("no metrics listening line:\n%s", in.stderr)
	}
	c := newClient(t)
	res, err := c.Get("http://" + m[1] + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Errorf("/debug/pprof/heap: %d %.200s", res.StatusCode, body)
	}
	callStatus(t, c, "GET", "http://"+in.addr+"/debug/pprof/", "", nil, http.StatusNotFound, nil)
}

// TestStoreGauges: each store's gauges come from what it offers: bbolt's
// costly searches and file size, PostgreSQL's lead of the chores (not
// taken: no chores run here), and neither has the other's.
func TestStoreGauges(t *testing.T) {
	for _, tt := range []struct {
		name         string
		db           func(t *testing.T) string
		want, absent []string
	}{
		{"bbolt", func(t *testing.T) string { return filepath.Join(t.TempDir(), "herald.db") },
			[]string{"herald_search_costly_running 0\n", "herald_search_costly_waiting 0\n", "herald_db_size_bytes "},
			[]string{"herald_db_leading_chores", "herald_db_size_bytes 0\n"}},
		{"postgres", func(t *testing.T) string { return postgresCluster(t).Database(t) },
			[]string{"herald_db_leading_chores 0\n"},
			[]string{"herald_search_costly", "herald_db_size_bytes"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseConfig([]string{"--db", tt.db(t)}, environ(nil), io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			db, err := openStore(context.Background(), cfg, 1, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := db.Close(); err != nil {
					t.Error(err)
				}
			})
			set := metrics.NewSet()
			storeGauges(set, db)
			var out strings.Builder
			set.WritePrometheus(&out)
			for _, want := range tt.want {
				if !strings.Contains(out.String(), want) {
					t.Errorf("gauges lack %q:\n%s", want, out.String())
				}
			}
			for _, absent := range tt.absent {
				if strings.Contains(out.String(), absent) {
					t.Errorf("gauges have %q:\n%s", absent, out.String())
				}
			}
		})
	}
}
