package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"herald/bolt"
	"herald/model"
)

// runWithInput is runArgs with stdin.
func runWithInput(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	code = run(context.Background(), args, environ(nil), strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// roles opens the stopped database at path and returns email's roles.
func roles(t *testing.T, path, email string) []string {
	t.Helper()
	db, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	u, err := db.UserByEmail(context.Background(), email)
	if err != nil {
		t.Fatalf("%s: %v", email, err)
	}
	return u.Roles
}

// TestAdminCommand: herald admin makes and unmakes administrators on the
// server's machine, says what went wrong otherwise, and refuses a database
// a running server holds.
func TestAdminCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.db")
	const password = "correct horse battery\n"
	if code, out, _ := runArgs(t, "admin"); code != 2 || !strings.Contains(out, "herald admin grant") {
		t.Errorf("herald admin with no action = %d\n%s", code, out)
	}
	if code, _, errOut := runArgs(t, "admin", "grant", "--db", path, "root@example.com"); code != 1 || !strings.Contains(errOut, "does not exist") {
		t.Errorf("grant on a missing database = %d %s", code, errOut)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("grant created %s", path)
	}
	if code, _, errOut := runWithInput(t, "short\n", "admin", "create", "--db", path, "root@example.com"); code != 1 || !strings.Contains(errOut, "password") {
		t.Errorf("create with a short password = %d %s", code, errOut)
	}
	code, out, errOut := runWithInput(t, password, "admin", "create", "--db", path, "Root@Example.com")
	if code != 0 || !strings.Contains(out, "created Root@Example.com, an administrator") {
		t.Fatalf("create = %d\n%s%s", code, out, errOut)
	}
	if got := roles(t, path, "root@example.com"); !slices.Equal(got, []string{model.RoleUser, model.RoleAdmin}) {
		t.Errorf("created administrator's roles %v", got)
	}
	if code, _, errOut := runWithInput(t, password, "admin", "create", "--db", path, "root@example.com"); code != 1 || !strings.Contains(errOut, "already has an account") {
		t.Errorf("create again = %d %s", code, errOut)
	}
	if code, _, errOut := runWithInput(t, password, "admin", "create", "--db", path, "r\u1d0fot@example.com"); code != 1 ||
		!strings.Contains(errOut, "looks like the address of an existing account") {
		t.Errorf("create a look-alike of root = %d %s", code, errOut)
	}
	if code, _, errOut := runArgs(t, "admin", "grant", "--db", path, "nobody@example.com"); code != 1 || !strings.Contains(errOut, "no account has the e-mail") {
		t.Errorf("grant an unknown e-mail = %d %s", code, errOut)
	}
	if code, _, errOut := runArgs(t, "admin", "revoke", "--db", path, "root@example.com"); code != 1 || !strings.Contains(errOut, "last administrator") {
		t.Errorf("revoke the last administrator = %d %s", code, errOut)
	}
	if code, _, errOut := runWithInput(t, password, "admin", "create", "--db", path, "other@example.com"); code != 0 {
		t.Fatalf("create other = %d %s", code, errOut)
	}
	if code, out, errOut := runArgs(t, "admin", "revoke", "--db", path, "root@example.com"); code != 0 || !strings.Contains(out, "no longer an administrator") {
		t.Errorf("revoke root beside other = %d %s%s", code, out, errOut)
	}
	if got := roles(t, path, "root@example.com"); !slices.Equal(got, []string{model.RoleUser}) {
		t.Errorf("revoked administrator's roles %v", got)
	}

	// The created account logs in with its password, as an administrator,
	// and the audit log says the acts were made on the server's machine.
	in := startListening(t, []string{"--addr", "127.0.0.1:0", "--db", path}, nil)
	res, err := http.Post("http://"+in.addr+"/api/login", "application/json", strings.NewReader(`{"username":"other@example.com","password":"correct horse battery"}`))
	if err != nil {
		t.Fatal(err)
	}
	var login struct{ Token string }
	err = json.NewDecoder(res.Body).Decode(&login)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("login: %d %v", res.StatusCode, err)
	}
	req, _ := http.NewRequest("GET", "http://"+in.addr+"/api/admin/audit", nil)
	req.Header.Set("Authorization", "Bearer "+login.Token)
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var audit struct {
		Items []struct {
			Action string
			Actor  map[string]any
		}
	}
	err = json.NewDecoder(res.Body).Decode(&audit)
	res.Body.Close()
	if err != nil || len(audit.Items) != 3 || audit.Items[0].Action != "revoke-admin" ||
		!maps.Equal(audit.Items[0].Actor, map[string]any{"type": "server"}) {
		t.Errorf("audit log after herald admin: %+v, %v", audit, err)
	}
	// While the server holds the database, herald admin fails at once.
	if code, _, errOut := runArgs(t, "admin", "grant", "--db", path, "root@example.com"); code != 1 || !strings.Contains(errOut, "in use by another process") {
		t.Errorf("grant while a server runs = %d %s", code, errOut)
	}
}

// TestAdminsSettingCarriedOver: --admins, read by releases before
// administrators were stored, makes the upgrade of such a database store
// the role with those accounts; any other start with it is refused, a new
// database included, so the setting is never a way in again.
func TestAdminsSettingCarriedOver(t *testing.T) {
	fresh := filepath.Join(t.TempDir(), "new.db")
	code, _, errOut := runArgs(t, "--addr", "127.0.0.1:0", "--db", fresh, "--admins", "owner@example.com")
	if code != 1 || !strings.Contains(errOut, "no longer read") {
		t.Errorf("--admins on a new database = %d %s", code, errOut)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("the refused start created %s", fresh)
	}

	b, err := os.ReadFile(filepath.Join("bolt", "testdata", "layout6.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "herald.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// herald admin leaves the upgrade, and the carrying over, to the
	// server: it refuses the older file, and changes nothing in it.
	code, _, errOut = runArgs(t, "admin", "grant", "--db", path, "ada@example.com")
	if code != 1 || !strings.Contains(errOut, "start herald on it once") {
		t.Errorf("herald admin on a layout-6 file = %d %s", code, errOut)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, b) {
		t.Errorf("herald admin changed the layout-6 file it refused (%v)", err)
	}
	in := startListening(t, []string{"--addr", "127.0.0.1:0", "--db", path}, map[string]string{"HERALD_ADMINS": "OWNER@example.com"})
	if logs := in.stderr.String(); !strings.Contains(logs, "made=owner@example.com") {
		t.Errorf("the upgrade's log does not name the administrator it made:\n%s", logs)
	}
	in.cancel()
	if code := <-in.done; code != 0 {
		t.Fatalf("stopping: %d\n%s", code, in.stderr)
	}
	in.done <- 0
	if got := roles(t, path, "owner@example.com"); !slices.Equal(got, []string{model.RoleUser, model.RoleAdmin}) {
		t.Errorf("owner's roles after the upgrade %v", got)
	}
	code, _, errOut = runArgs(t, "--addr", "127.0.0.1:0", "--db", path, "--admins", "owner@example.com")
	if code != 1 || !strings.Contains(errOut, "no longer read") {
		t.Errorf("--admins on an upgraded database = %d %s", code, errOut)
	}
}
