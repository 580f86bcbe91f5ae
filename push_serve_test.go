package main

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunPush: with --push-contact, run serves the VAPID key, the same
// after a restart (it is kept in the database), and logs that push is
// on; without it, the push routes are 404; a malformed contact stops the
// start with a message naming the flag.
func TestRunPush(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "herald.db")
	vars := map[string]string{"HERALD_ADDR": "127.0.0.1:0", "HERALD_DB": dbPath, "HERALD_HASH_CONCURRENCY": "2"}
	c := newClient(t)
	key := func(args ...string) (int, string) {
		t.Helper()
		in := startListening(t, args, vars)
		defer in.stop(t)
		base := "http://" + in.addr
		var reg tokenResponse
		resp, _ := call(t, c, http.MethodPost, base+"/api/login", "", map[string]string{"username": "ada@example.com", "password": "Sup3r-Secret-Passw0rd"})
		if resp.StatusCode != http.StatusOK {
			callStatus(t, c, http.MethodPost, base+"/api/register", "", map[string]string{"email": "ada@example.com", "password": "Sup3r-Secret-Passw0rd"}, http.StatusCreated, &reg)
		} else {
			callStatus(t, c, http.MethodPost, base+"/api/login", "", map[string]string{"username": "ada@example.com", "password": "Sup3r-Secret-Passw0rd"}, http.StatusOK, &reg)
		}
		var out struct{ PublicKey string }
		resp, body := call(t, c, http.MethodGet, base+"/api/push/key", reg.Token, nil)
		if resp.StatusCode == http.StatusOK {
			if len(args) > 0 && !strings.Contains(in.stderr.String(), "Web Push on") {
				t.Errorf("no log line says push is on:\n%s", in.stderr)
			}
			callStatus(t, c, http.MethodGet, base+"/api/push/key", reg.Token, nil, http.StatusOK, &out)
		} else if !strings.Contains(string(body), "not configured") {
			t.Errorf("GET /api/push/key with push off: %s", body)
		}
		return resp.StatusCode, out.PublicKey
	}
	if status, _ := key(); status != http.StatusNotFound {
		t.Errorf("push off: /api/push/key %d, want 404", status)
	}
	status, first := key("--push-contact", "mailto:ops@example.com")
	if status != http.StatusOK || len(first) != 87 {
		t.Fatalf("push on: /api/push/key %d %q", status, first)
	}
	if _, again := key("--push-contact", "https://example.com/ops"); again != first {
		t.Errorf("the key after a restart = %q, want %q", again, first)
	}
	code, _, errOut := runArgs(t, "--db", dbPath, "--addr", "127.0.0.1:0", "--push-contact", "ops@example.com")
	if code == 0 || !strings.Contains(errOut, "--push-contact") {
		t.Errorf("a bare address as contact: exit %d, %q; want a refusal naming --push-contact", code, errOut)
	}
}
