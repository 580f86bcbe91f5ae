package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartupSaysWhatToDo: the startup's log names the address to open
// and who may register, and, while no account can administer, the
// command that makes one; once one exists it no longer asks.
func TestStartupSaysWhatToDo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "my data", "herald.db")
	args := []string{"--addr", "127.0.0.1:0", "--db", path, "--registration", "invite"}
	if err := os.Mkdir(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	in := startListening(t, args, nil)
	logs := in.stderr.String()
	for _, want := range []string{
		"url=http://" + in.addr + "/ registration=invite",
		`msg="no administrator yet: make one on this machine" command="herald admin create --db '` + path + `' you@example.com" when="with the server stopped"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the startup's log lacks %s:\n%s", want, logs)
		}
	}
	if code := in.stop(t); code != 0 {
		t.Fatalf("stop = %d", code)
	}
	if code, _, errOut := runWithInput(t, "correct horse battery\n", "admin", "create", "--db", path, "root@example.com"); code != 0 {
		t.Fatalf("herald admin create = %d %s", code, errOut)
	}
	in = startListening(t, args, nil)
	if logs := in.stderr.String(); strings.Contains(logs, "no administrator") {
		t.Errorf("the startup's log asks for an administrator, with one made:\n%s", logs)
	}
}

// TestOpenURL: the address the startup's log tells a person to open.
func TestOpenURL(t *testing.T) {
	for _, c := range []struct {
		addr, publicURL string
		https           bool
		tlsURL, want    string
	}{
		{"127.0.0.1:8080", "", false, "", "http://127.0.0.1:8080/"},
		{"127.0.0.1:8443", "", true, "", "https://127.0.0.1:8443/"},
		{"[::]:443", "", true, "https://herald.example.com/", "https://herald.example.com/"},
		{"[::]:443", "https://chat.example.com", true, "https://herald.example.com/", "https://chat.example.com/"},
		{"0.0.0.0:8080", "", false, "", "http://127.0.0.1:8080/"},
		{"[::]:8080", "", false, "", "http://127.0.0.1:8080/"},
		{"192.168.1.20:80", "", false, "", "http://192.168.1.20:80/"},
		{"[::1]:8080", "", false, "", "http://[::1]:8080/"},
		{"127.0.0.1:8080", "https://herald.example.com", false, "", "https://herald.example.com/"},
		{"127.0.0.1:8080", "https://herald.example.com/", false, "", "https://herald.example.com/"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := openURL(&config{publicURL: c.publicURL}, addr, c.https, c.tlsURL); got != c.want {
			t.Errorf("openURL(%s, public URL %q, https %v, %q) = %s, want %s", c.addr, c.publicURL, c.https, c.tlsURL, got, c.want)
		}
	}
}

// TestAdminCreateCommand: the command the log gives is one a shell runs
// as it is, and never repeats a database password.
func TestAdminCreateCommand(t *testing.T) {
	for _, c := range []struct{ db, want string }{
		{"/var/lib/herald/herald.db", "herald admin create --db /var/lib/herald/herald.db you@example.com"},
		{"it's here.db", `herald admin create --db 'it'\''s here.db' you@example.com`},
		{"postgres://herald:secret@db.internal/herald", "herald admin create --db postgres://herald:xxxxx@db.internal/herald you@example.com"},
		{"postgres:///herald?host=/run/postgresql", "herald admin create --db 'postgres:///herald?host=/run/postgresql' you@example.com"},
	} {
		if got, _ := adminCreateCommand(c.db); got != c.want {
			t.Errorf("adminCreateCommand(%q) = %s, want %s", c.db, got, c.want)
		}
	}
}
