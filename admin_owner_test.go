//go:build linux

package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAdminActsAsDatabaseOwner: herald admin, run as root on a database in
// a directory another user owns (as the package's /var/lib/herald is the
// herald user's), creates the file as that user, so that a server running
// as that user opens it and the administrator logs in; a file there that
// root owns is refused, with the command that gives it back. Needs root,
// as the package's steps do.
func TestAdminActsAsDatabaseOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: herald admin acts as another user only when run as root")
	}
	const nobody = 65534 // Debian's nobody:nogroup
	base := t.TempDir()
	// The test's temp dirs only their owner may enter; nobody must reach
	// the database and the binary through them.
	for d := base; d != filepath.Clean(os.TempDir()) && d != filepath.Dir(d); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(base, "data")
	if err := os.Mkdir(data, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(data, "herald.db")
	// This test binary, where nobody may run it, acting as herald.
	bin := filepath.Join(base, "herald")
	copyFile(t, os.Args[0], bin, 0o755)
	herald := func(stdin string, args ...string) (code int, stderr string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), runMainEnv+"=1")
		cmd.Stdin = strings.NewReader(stdin)
		var errOut strings.Builder
		cmd.Stderr = &errOut
		err := cmd.Run()
		if exit, ok := err.(*exec.ExitError); ok {
			return exit.ExitCode(), errOut.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, errOut.String()
	}

	code, errOut := herald("correct horse battery\n", "admin", "create", "--db", db, "root@example.com")
	if code != 0 || !strings.Contains(errOut, "acting as nobody:nogroup, the owner of "+data) {
		t.Fatalf("herald admin create as root = %d %s", code, errOut)
	}
	if fi, err := os.Stat(db); err != nil || fi.Sys().(*syscall.Stat_t).Uid != nobody || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the database herald admin created: %v, %v", fi.Sys(), err)
	}

	// The server, as the directory's owner, opens it; the administrator
	// logs in.
	server := exec.Command(bin)
	server.Env = append(os.Environ(), runMainEnv+"=1", "HERALD_ADDR=127.0.0.1:0", "HERALD_DB="+db)
	server.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	logs := &syncBuffer{}
	server.Stderr = logs
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan int, 1)
	go func() { _ = server.Wait(); exited <- server.ProcessState.ExitCode() }()
	t.Cleanup(func() {
		_ = server.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			_ = server.Process.Kill()
		}
	})
	addr := waitListening(t, logs, exited)
	res, err := http.Post("http://"+addr+"/api/login", "application/json", strings.NewReader(`{"username":"root@example.com","password":"correct horse battery"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("login on the server running as nobody: %d %s\n%s", res.StatusCode, body, logs)
	}
	_ = server.Process.Signal(syscall.SIGTERM)
	if code := <-exited; code != 0 {
		t.Fatalf("the server exited with %d:\n%s", code, logs)
	}
	exited <- 0

	// A file of root's in nobody's directory is refused as it is.
	if err := os.Chown(db, 0, 0); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	code, errOut = herald("", "admin", "grant", "--db", db, "root@example.com")
	if code != 1 || !strings.Contains(errOut, "give it back first: chown nobody:nogroup "+db) {
		t.Errorf("herald admin on a file of root's in nobody's directory = %d %s", code, errOut)
	}
	if after, err := os.ReadFile(db); err != nil || string(after) != string(before) {
		t.Errorf("the refused act changed the file (%v)", err)
	}
}

// copyFile copies from to a new file to with mode perm.
func copyFile(t *testing.T, from, to string, perm os.FileMode) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
