package http_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
)

// setGet reads the settings with token.
func setGet(t *testing.T, e *apitest.Env, token string) map[string]any {
	t.Helper()
	res := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/settings", Token: token})
	if res.Status != http.StatusOK {
		t.Fatalf("GET /api/admin/settings = %d: %s", res.Status, res.Body)
	}
	return res.JSON(t)
}

// setPatch changes the settings with token and returns the answer.
func setPatch(e *apitest.Env, token, contentType, body string) *apitest.Response {
	return e.Do(apitest.Request{Method: "PATCH", Path: "/api/admin/settings", Token: token, ContentType: contentType, Body: body})
}

// setInfoMode is the registration mode GET /api/info tells anyone at url.
func setInfoMode(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url + "/api/info")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var info struct{ Registration string }
	if err := json.NewDecoder(res.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	return info.Registration
}

// TestSettings: an administrator reads the settings (the flags' values
// while the database holds none) and changes them without a restart:
// registration closes at once, /api/info says so, the write limit bites
// at once, and each change is in the audit log with what it changed.
func TestSettings(t *testing.T) {
	e := apitest.New(t, apitest.WithLimits(heraldhttp.Limits{WritesPerAccount: auth.Rate{Burst: 100, Every: time.Hour}}))
	root := e.Admin("root@example.com")
	ada := e.Register("ada@example.com", pw)
	if got := setGet(t, e, root); got["registration"] != "open" || got["writesPerAccount"] != "100/1h" {
		t.Fatalf("settings of a database that holds none = %v, want the flags' open and 100/1h", got)
	}

	res := setPatch(e, root, "application/json", `{"registration":"closed"}`)
	if got := res.JSON(t); res.Status != http.StatusOK || got["registration"] != "closed" || got["writesPerAccount"] != "100/1h" {
		t.Fatalf("PATCH registration closed = %d %s", res.Status, res.Body)
	}
	if mode := setInfoMode(t, e.URL); mode != "closed" {
		t.Errorf("/api/info says registration %q, want closed", mode)
	}
	reg := e.Do(apitest.Request{Method: "POST", Path: "/api/register", ContentType: "application/json", Body: `{"email":"bob@example.com","password":"correct horse battery"}`})
	apitest.AssertProblem(t, reg, http.StatusForbidden)

	res = setPatch(e, root, "application/merge-patch+json", `{"writesPerAccount":" 2/1h "}`)
	if got := res.JSON(t); res.Status != http.StatusOK || got["writesPerAccount"] != "2/1h" || got["registration"] != "closed" {
		t.Fatalf("PATCH writesPerAccount 2/1h = %d %s", res.Status, res.Body)
	}
	e.Post(ada, "one")
	e.Post(ada, "two")
	third := e.Do(apitest.Request{Method: "POST", Path: "/api/messages", Token: ada, ContentType: "application/json", Body: `{"content":"three"}`})
	apitest.AssertProblem(t, third, http.StatusTooManyRequests)

	// Audited, newest first, each with what it changed and who.
	audit := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/audit", Token: root}).JSON(t)
	items, _ := audit["items"].([]any)
	if len(items) < 2 {
		t.Fatalf("audit log: %v", audit)
	}
	for i, want := range []map[string]any{{"writesPerAccount": "2/1h"}, {"registration": "closed"}} {
		entry, _ := items[i].(map[string]any)
		actor, _ := entry["actor"].(map[string]any)
		settings, _ := entry["settings"].(map[string]any)
		if entry["action"] != "settings-update" || actor["email"] != "root@example.com" || entry["target"] != nil || len(settings) != len(want) {
			t.Errorf("audit entry %d = %v, want settings-update by root of %v", i, entry, want)
			continue
		}
		for k, v := range want {
			if settings[k] != v {
				t.Errorf("audit entry %d = %v, want settings-update by root of %v", i, entry, want)
			}
		}
	}

	// A value given again changes nothing, and is not audited.
	before := len(items)
	if res := setPatch(e, root, "application/json", `{"registration":"closed"}`); res.Status != http.StatusOK {
		t.Fatalf("PATCH the same value = %d %s", res.Status, res.Body)
	}
	if items, _ := e.Do(apitest.Request{Method: "GET", Path: "/api/admin/audit", Token: root}).JSON(t)["items"].([]any); len(items) != before {
		t.Errorf("a PATCH that changed nothing was audited: %d entries, want %d", len(items), before)
	}
}

// TestSettingsRefused: a value a setting does not take is a 422 naming
// it, a field that is no setting a 400, and nothing is stored or audited.
func TestSettingsRefused(t *testing.T) {
	e := apitest.New(t)
	root := e.Admin("root@example.com")
	want := setGet(t, e, root)
	audited := len(e.Do(apitest.Request{Method: "GET", Path: "/api/admin/audit", Token: root}).JSON(t)["items"].([]any))
	for _, tt := range []struct {
		name, contentType, body string
		status                  int
		field                   string
	}{
		{"unknown mode", "application/json", `{"registration":"sometimes"}`, 422, "registration"},
		{"mode in capitals", "application/json", `{"registration":"OPEN"}`, 422, "registration"},
		{"null mode", "application/merge-patch+json", `{"registration":null}`, 422, "registration"},
		{"empty mode", "application/x-www-form-urlencoded", `registration=`, 422, "registration"},
		{"burst of 0", "application/json", `{"writesPerAccount":"0/5s"}`, 422, "writesPerAccount"},
		{"no interval", "application/json", `{"writesPerAccount":"60"}`, 422, "writesPerAccount"},
		{"words", "application/json", `{"writesPerAccount":"fast"}`, 422, "writesPerAccount"},
		{"interval over a day", "application/json", `{"writesPerAccount":"5/48h"}`, 422, "writesPerAccount"},
		{"burst over a million", "application/json", `{"writesPerAccount":"1000001/1s"}`, 422, "writesPerAccount"},
		{"one good, one bad", "application/json", `{"registration":"closed","writesPerAccount":"x"}`, 422, "writesPerAccount"},
		{"a number", "application/json", `{"writesPerAccount":60}`, 400, "writesPerAccount"},
		{"not a setting", "application/json", `{"colour":"blue"}`, 400, "colour"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := setPatch(e, root, tt.contentType, tt.body)
			p := apitest.AssertProblem(t, res, tt.status)
			if tt.status == 422 {
				if paths := apitest.ViolationPaths(p); len(paths) != 1 || paths[0] != tt.field {
					t.Errorf("violations name %v, want %s", paths, tt.field)
				}
			} else if detail, _ := p["detail"].(string); !strings.Contains(detail, tt.field) {
				t.Errorf("detail %q does not name %s", detail, tt.field)
			}
		})
	}
	if got := setGet(t, e, root); got["registration"] != want["registration"] || got["writesPerAccount"] != want["writesPerAccount"] {
		t.Errorf("after refused changes the settings are %v, want %v", got, want)
	}
	if n := len(e.Do(apitest.Request{Method: "GET", Path: "/api/admin/audit", Token: root}).JSON(t)["items"].([]any)); n != audited {
		t.Errorf("refused changes were audited: %d entries, want %d", n, audited)
	}
}

// setInstance starts another server on e's store, with flags that say
// registration is open, following the settings as main has it do.
func setInstance(t *testing.T, e *apitest.Env) string {
	t.Helper()
	s := heraldhttp.NewServer(e.DB, auth.NewHasher(apitest.FastParams, 1), heraldhttp.Config{Registration: heraldhttp.RegistrationOpen})
	ctx, cancel := context.WithCancel(context.Background())
	stopped, err := s.FollowSettings(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); cancel(); <-stopped })
	return srv.URL
}

// TestSettingsFollowedByEveryInstance: a change made on one instance is in
// force on another on the same database within seconds, without a
// restart; and an instance started later takes the database's value over
// its flag's.
func TestSettingsFollowedByEveryInstance(t *testing.T) {
	e := apitest.New(t)
	root := e.Admin("root@example.com")
	other := setInstance(t, e)
	if mode := setInfoMode(t, other); mode != "open" {
		t.Fatalf("the other instance's registration = %q before the change, want open", mode)
	}
	if res := setPatch(e, root, "application/json", `{"registration":"invite"}`); res.Status != http.StatusOK {
		t.Fatalf("PATCH = %d %s", res.Status, res.Body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for setInfoMode(t, other) != "invite" {
		if time.Now().After(deadline) {
			t.Fatal("the other instance still says registration is open 10 s after the change")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if mode := setInfoMode(t, setInstance(t, e)); mode != "invite" {
		t.Errorf("an instance started after the change, its flag open, says registration is %q, want the database's invite", mode)
	}
}
