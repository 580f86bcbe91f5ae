package mail

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/mail/mailtest"
)

func TestParseURL(t *testing.T) {
	dir := t.TempDir()
	passwordFile := filepath.Join(dir, "password")
	if err := os.WriteFile(passwordFile, []byte("from the file\r\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		raw, file string
		want      Settings
		err       string
	}{
		{raw: "smtp://ada:secret@mail.example.com", want: Settings{Host: "mail.example.com", Port: 587, Username: "ada", Password: "secret"}},
		{raw: "smtp://mail.example.com:2525", want: Settings{Host: "mail.example.com", Port: 2525}},
		{raw: "smtps://ada:s%40cret@mail.example.com", want: Settings{Host: "mail.example.com", Port: 465, Username: "ada", Password: "s@cret", ImplicitTLS: true}},
		{raw: "smtp://ada:secret@mail.example.com", file: passwordFile, want: Settings{Host: "mail.example.com", Port: 587, Username: "ada", Password: "from the file"}},
		{raw: "smtp://127.0.0.1:25?tls=none", want: Settings{Host: "127.0.0.1", Port: 25, PlainText: true}},
		{raw: "smtp://localhost:25?tls=none", want: Settings{Host: "localhost", Port: 25, PlainText: true}},
		{raw: "smtp://[::1]:25?tls=none", want: Settings{Host: "::1", Port: 25, PlainText: true}},
		{raw: "smtp://mail.example.com:25?tls=none", err: "only for a mail server on this machine"},
		{raw: "smtp://10.0.0.5:25?tls=none", err: "only for a mail server on this machine"},
		{raw: "smtps://127.0.0.1?tls=none", err: "contradicts"},
		{raw: "smtp://127.0.0.1?tls=off", err: "the only value is none"},
		{raw: "smtp://127.0.0.1?tsl=none", err: "unknown parameter"},
		{raw: "http://mail.example.com", err: "scheme"},
		{raw: "mail.example.com:587", err: "must be a URL"},
		{raw: "smtp://", err: "must be a URL"},
		{raw: "smtp://mail.example.com:99999", err: "not a port number"},
		{raw: "smtp://mail.example.com", file: filepath.Join(dir, "missing"), err: "reading the password file"},
	} {
		got, err := ParseURL(tc.raw, tc.file)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseURL(%q) = %+v, %v; want an error saying %q", tc.raw, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("ParseURL(%q) = %+v, %v; want %+v", tc.raw, got, err, tc.want)
		}
	}
}

// logBuffer is a log a test reads while the sender writes it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// run starts s's loop until the test ends, with retries wait apart.
func run(t *testing.T, s *Sender, wait time.Duration) {
	t.Helper()
	s.retryAfter = func(int) time.Duration { return wait }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func resetMail(t *testing.T) Message {
	t.Helper()
	m, err := PasswordReset("ada@example.com", "herald.example.com", "https://herald.example.com/#reset=herald_reset_SECRETCODE",
		time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSendOverStartTLS: a password-reset e-mail goes over STARTTLS,
// logged in, from --mail-from to the account's address, with the link in
// both its plain-text and its HTML part; the log says it was sent and
// holds neither the link nor the recipient's name.
func TestSendOverStartTLS(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{TLS: true, User: "herald", Password: "mail secret"})
	var log logBuffer
	s := NewSender(Settings{Host: "127.0.0.1", Port: srv.Port, Username: "herald", Password: "mail secret",
		From: "Herald <herald@example.com>", TLS: srv.TLS}, slog.New(slog.NewTextHandler(&log, nil)))
	run(t, s, 10*time.Millisecond)
	if !s.Send(resetMail(t)) {
		t.Fatal("Send refused the e-mail")
	}
	got := srv.Wait(t, 1, 10*time.Second)
	r := got[0]
	if !r.TLS || r.User != "herald" || r.From != "herald@example.com" || len(r.To) != 1 || r.To[0] != "ada@example.com" {
		t.Fatalf("received %s", r)
	}
	if subj := r.Message.Header.Get("Subject"); subj != "Reset your password on herald.example.com" {
		t.Errorf("Subject %q", subj)
	}
	text, html := r.Parts(t)
	link := "https://herald.example.com/#reset=herald_reset_SECRETCODE"
	if !strings.Contains(text, link) || !strings.Contains(html, `href="`+link+`"`) {
		t.Errorf("the link is not in both parts:\n%s\n---\n%s", text, html)
	}
	waitFor(t, func() bool { return strings.Contains(log.String(), "e-mail sent") })
	for _, secret := range []string{"SECRETCODE", "ada@", "mail secret"} {
		if strings.Contains(log.String(), secret) {
			t.Errorf("the log holds %q:\n%s", secret, log.String())
		}
	}
}

// TestStartTLSRequired: without ?tls=none, a server that offers no
// STARTTLS is sent nothing: the e-mail is not sent in the clear.
func TestStartTLSRequired(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{})
	var log logBuffer
	s := NewSender(Settings{Host: "127.0.0.1", Port: srv.Port, From: "herald@example.com"}, slog.New(slog.NewTextHandler(&log, nil)))
	run(t, s, time.Hour)
	s.Send(resetMail(t))
	waitFor(t, func() bool { return strings.Contains(log.String(), "trying again") })
	if got := srv.Messages(t); len(got) != 0 {
		t.Errorf("sent without TLS: %v", got)
	}
}

// TestPlainTextOnLoopback: with ?tls=none the e-mail goes to a server on
// loopback without TLS.
func TestPlainTextOnLoopback(t *testing.T) {
	srv := mailtest.Start(t, mailtest.Options{})
	s := NewSender(Settings{Host: "127.0.0.1", Port: srv.Port, PlainText: true, From: "herald@example.com"}, nil)
	run(t, s, 10*time.Millisecond)
	s.Send(resetMail(t))
	if r := srv.Wait(t, 1, 10*time.Second)[0]; r.TLS || r.To[0] != "ada@example.com" {
		t.Errorf("received %s", r)
	}
}

// TestRetries: a server that answers 451 twice gets the e-mail on the
// third try, once; one that answers 550 is not tried again; one that
// cannot be reached is tried maxAttempts times, then given up, logged.
func TestRetries(t *testing.T) {
	t.Run("temporary", func(t *testing.T) {
		srv := mailtest.Start(t, mailtest.Options{Fail: 2})
		var log logBuffer
		s := NewSender(Settings{Host: "127.0.0.1", Port: srv.Port, PlainText: true, From: "herald@example.com"}, slog.New(slog.NewTextHandler(&log, nil)))
		run(t, s, 10*time.Millisecond)
		s.Send(resetMail(t))
		srv.Wait(t, 1, 10*time.Second)
		waitFor(t, func() bool { return strings.Contains(log.String(), "attempts=3") })
		time.Sleep(100 * time.Millisecond)
		if got := srv.Messages(t); len(got) != 1 {
			t.Errorf("received %d, want the e-mail once", len(got))
		}
	})
	t.Run("permanent", func(t *testing.T) {
		srv := mailtest.Start(t, mailtest.Options{Reject: true})
		var log logBuffer
		s := NewSender(Settings{Host: "127.0.0.1", Port: srv.Port, PlainText: true, From: "herald@example.com"}, slog.New(slog.NewTextHandler(&log, nil)))
		run(t, s, 10*time.Millisecond)
		s.Send(resetMail(t))
		waitFor(t, func() bool { return strings.Contains(log.String(), "giving up") })
		if strings.Contains(log.String(), "trying again") || !strings.Contains(log.String(), "attempts=1") {
			t.Errorf("a 550 was tried again:\n%s", log.String())
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close() // nothing listens there now
		var log logBuffer
		s := NewSender(Settings{Host: "127.0.0.1", Port: port, PlainText: true, From: "herald@example.com"}, slog.New(slog.NewTextHandler(&log, nil)))
		run(t, s, 10*time.Millisecond)
		s.Send(resetMail(t))
		waitFor(t, func() bool { return strings.Contains(log.String(), "giving up") })
		if n := strings.Count(log.String(), "trying again"); n != maxAttempts-1 {
			t.Errorf("tried again %d times, want %d:\n%s", n, maxAttempts-1, log.String())
		}
	})
}

// TestQueueBounded: e-mails beyond the queue are dropped, never waited
// for.
func TestQueueBounded(t *testing.T) {
	s := NewSender(Settings{Host: "127.0.0.1", Port: 1, PlainText: true, From: "herald@example.com"}, nil)
	m := resetMail(t)
	for i := range queueSize {
		if !s.Send(m) {
			t.Fatalf("e-mail %d refused with room in the queue", i)
		}
	}
	if s.Send(m) {
		t.Error("an e-mail beyond the queue was taken")
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
