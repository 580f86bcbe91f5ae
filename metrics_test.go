package main

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
