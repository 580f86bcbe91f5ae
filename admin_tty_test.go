//go:build linux

package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"herald/model"
)

// terminal is a pseudo-terminal whose far end a test types into and reads
// what was shown on it.
type terminal struct {
	tty   *os.File // the end herald reads and writes, as its terminal
	ptmx  *os.File // the end the test types into and reads from
	shown syncBuffer
	typed map[string]int // how often each prompt was answered
}

func openTerminal(t *testing.T) *terminal {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	// The test's end non-blocking, so that os.File reads it through the
	// poller and closing it ends the read below at once, whatever herald
	// was left doing when a test failed; herald's end stays as a terminal
	// is.
	fd, err := unix.Dup(int(ptmx.Fd()))
	ptmx.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	term := &terminal{tty: tty, ptmx: os.NewFile(uintptr(fd), "ptmx"), typed: map[string]int{}}
	read := make(chan struct{})
	go func() {
		defer close(read)
		buf := make([]byte, 256)
		for {
			n, err := term.ptmx.Read(buf)
			term.shown.Write(buf[:n])
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		term.ptmx.Close() // herald's end then reads an error, if it still reads
		<-read
		tty.Close()
	})
	return term
}

// waitFor waits until the terminal shows text, and says whether it did
// within 10 s.
func (term *terminal) waitFor(text string) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(term.shown.String(), text) {
			return true
		}
	}
	return false
}

// typeAfter waits until the terminal shows prompt and no longer echoes,
// then types line and Enter. Waiting for echo to be off first makes the
// test see whether herald turned it off, not a race with it.
func (term *terminal) typeAfter(t *testing.T, prompt, line string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tio, err := unix.IoctlGetTermios(int(term.tty.Fd()), unix.TCGETS)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(term.shown.String(), prompt) > term.typed[prompt] && tio.Lflag&unix.ECHO == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q with echo off within 10 s; shown:\n%s", prompt, term.shown.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	term.typed[prompt]++
	if _, err := term.ptmx.Write([]byte(line + "\r")); err != nil {
		t.Fatal(err)
	}
}

// TestAdminCreateOnTerminal: on a terminal, herald admin create asks for
// the password twice without showing it; two different passwords make it
// fail and change nothing, not even create the database.
func TestAdminCreateOnTerminal(t *testing.T) {
	const password = "correct horse battery"
	adminCreate := func(path string, term *terminal) (code chan int, stdout *syncBuffer) {
		code, stdout = make(chan int, 1), &syncBuffer{}
		go func() {
			code <- run(context.Background(), []string{"admin", "create", "--db", path, "root@example.com"},
				environ(nil), term.tty, stdout, term.tty)
		}()
		return code, stdout
	}
	const first, again = "Password for root@example.com: ", "The same password again: "

	t.Run("same password twice", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "herald.db")
		term := openTerminal(t)
		code, stdout := adminCreate(path, term)
		term.typeAfter(t, first, password)
		term.typeAfter(t, again, password)
		if c := <-code; c != 0 || !strings.Contains(stdout.String(), "created root@example.com") {
			t.Fatalf("herald admin create = %d\n%s\nterminal:\n%s", c, stdout, term.shown.String())
		}
		if shown := term.shown.String(); strings.Contains(shown, "horse") {
			t.Errorf("the terminal showed the password:\n%s", shown)
		}
		if got := roles(t, path, "root@example.com"); !slices.Equal(got, []string{model.RoleUser, model.RoleAdmin}) {
			t.Errorf("roles %v", got)
		}
	})

	t.Run("two different passwords", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "herald.db")
		term := openTerminal(t)
		code, _ := adminCreate(path, term)
		term.typeAfter(t, first, password)
		term.typeAfter(t, again, password+"!")
		if c := <-code; c != 1 || !term.waitFor("the two passwords differ; nothing was changed") {
			t.Errorf("herald admin create with two passwords = %d\nterminal:\n%s", c, term.shown.String())
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Errorf("the refused create left %s (%v)", path, err)
		}
	})
}
