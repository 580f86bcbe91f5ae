package main

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/pg/pgtest"
)

// The PostgreSQL cluster of this package's tests, started by the first
// test that needs one and stopped by TestMain.
var testPostgres struct {
	once    sync.Once
	cluster *pgtest.Cluster
}

// postgresCluster returns the running cluster, skipping t (or failing it,
// under HERALD_REQUIRE_POSTGRES=1) when there is none.
func postgresCluster(t *testing.T) *pgtest.Cluster {
	t.Helper()
	testPostgres.once.Do(func() { testPostgres.cluster = pgtest.Start() })
	testPostgres.cluster.Require(t)
	return testPostgres.cluster
}

func stopTestPostgres() {
	if testPostgres.cluster != nil {
		testPostgres.cluster.Stop()
	}
}

// TestRunOnPostgres: run serves on a PostgreSQL URL as on a file; herald
// admin makes its administrator; the hot backup, a bbolt feature, answers
// 501; the file tools refuse a URL, and --admins, which only an older
// bbolt file had to carry over, is refused.
func TestRunOnPostgres(t *testing.T) {
	url := postgresCluster(t).Database(t)
	vars := map[string]string{"HERALD_ADDR": "127.0.0.1:0", "HERALD_DB": url, "HERALD_HASH_CONCURRENCY": "2", "HERALD_DB_POOL": "4"}
	if code, _, errOut := runArgs(t, "--db", url, "--admins", "ada@example.com"); code != 1 || !strings.Contains(errOut, "--admins (HERALD_ADMINS) is no longer read") {
		t.Errorf("--admins on PostgreSQL = %d, %q", code, errOut)
	}
	if code, out, errOut := runWithInput(t, "correct horse\n", "admin", "create", "--db", url, "ada@example.com"); code != 0 {
		t.Fatalf("herald admin create on PostgreSQL = %d, %q, %q", code, out, errOut)
	}
	in := startListening(t, nil, vars)
	base := "http://" + in.addr
	c := newClient(t)
	var reg tokenResponse
	callStatus(t, c, "POST", base+"/api/login", "", map[string]string{"username": "ada@example.com", "password": "correct horse"}, http.StatusOK, &reg)
	var acct struct{ Roles []string }
	callStatus(t, c, "GET", base+"/api/me", reg.Token, nil, http.StatusOK, &acct)
	if !slices.Contains(acct.Roles, "ROLE_ADMIN") {
		t.Errorf("the administrator herald admin made has roles %v", acct.Roles)
	}
	var m messageResponse
	callStatus(t, c, "POST", base+"/api/messages", reg.Token, map[string]string{"content": "hello from postgres"}, http.StatusCreated, &m)
	var page struct{ Items []messageResponse }
	callStatus(t, c, "GET", base+"/api/messages?q=POSTGRES", reg.Token, nil, http.StatusOK, &page)
	if len(page.Items) != 1 || page.Items[0].ID != m.ID {
		t.Errorf("search = %+v, want message %d", page, m.ID)
	}
	callStatus(t, c, "GET", base+"/healthz", "", nil, http.StatusOK, nil)
	resp, body := call(t, c, "GET", base+"/api/admin/backup", reg.Token, nil)
	if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(resp.Header.Get("Content-Type"), "problem+json") {
		t.Errorf("backup on PostgreSQL: %d %s, want a 501 problem", resp.StatusCode, body)
	}
	if logs := in.stderr.String(); !strings.Contains(logs, `db="postgres:///`) || strings.Contains(logs, "password=") {
		t.Errorf("the log does not name the database, or names a password:\n%s", logs)
	}
	if code := in.stop(t); code != 0 {
		t.Errorf("run = %d, want 0; log:\n%s", code, in.stderr)
	}
	for _, tool := range [][]string{{"check", "--db", url}, {"backup", "--db", url, "out.db"}, {"compact", "--db", url, "out.db"}} {
		code, out, errOut := runArgs(t, tool...)
		if code != 1 || !strings.Contains(errOut, "works on a bbolt file") || out != "" {
			t.Errorf("herald %s on a URL = %d, %q, %q", tool[0], code, out, errOut)
		}
	}
	// The data stayed: a second run finds the account.
	in = startListening(t, nil, vars)
	callStatus(t, c, "GET", "http://"+in.addr+"/api/messages/"+strconv.FormatUint(m.ID, 10), reg.Token, nil, http.StatusOK, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := pgtest.QueryInt(ctx, url, "SELECT count(*) FROM messages"); err != nil || n != 1 {
		t.Errorf("messages in PostgreSQL = %d, %v", n, err)
	}
}
