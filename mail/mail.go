// Package mail sends Herald's e-mail: a password-reset link today. It
// owns the SMTP connection (through github.com/wneessen/go-mail), the
// e-mails' words, and the sending loop with its retries. A request only
// ever queues an e-mail: sending happens on the loop's goroutine, so a
// slow or absent mail server never holds a request up.
package mail

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
)

// Settings say how to reach the mail server and whom e-mails come from.
type Settings struct {
	Host     string
	Port     int
	Username string
	Password string
	// ImplicitTLS: the connection is TLS from its first byte (smtps://);
	// otherwise STARTTLS is required, unless PlainText.
	ImplicitTLS bool
	// PlainText sends without TLS, allowed only to a server on loopback
	// (?tls=none).
	PlainText bool
	From      string
	// TLS, when set, is the TLS configuration (tests trust their own
	// certificate authority with it).
	TLS *tls.Config
}

// ParseURL reads --smtp: smtp://user:pass@host:port (STARTTLS required,
// port 587 unless given), smtps://user:pass@host:port (implicit TLS, port
// 465 unless given), and ?tls=none, for a server on loopback only.
// passwordFile, when not empty, names a file whose first line is the
// password, in place of the URL's. Errors are sentences for the person
// starting Herald.
func ParseURL(raw, passwordFile string) (Settings, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return Settings{}, errors.New("must be a URL like smtp://user:password@mail.example.com:587")
	}
	var s Settings
	switch u.Scheme {
	case "smtp":
		s.Port = 587
	case "smtps":
		s.Port, s.ImplicitTLS = 465, true
	default:
		return Settings{}, fmt.Errorf("scheme %q is not smtp:// (STARTTLS) or smtps:// (TLS)", u.Scheme)
	}
	s.Host = u.Hostname()
	if p := u.Port(); p != "" {
		if s.Port, err = strconv.Atoi(p); err != nil || s.Port < 1 || s.Port > 65535 {
			return Settings{}, fmt.Errorf("port %q is not a port number", p)
		}
	}
	if u.User != nil {
		s.Username = u.User.Username()
		s.Password, _ = u.User.Password()
	}
	q := u.Query()
	for k := range q {
		if k != "tls" {
			return Settings{}, fmt.Errorf("unknown parameter %q (only tls=none is known)", k)
		}
	}
	switch q.Get("tls") {
	case "":
	case "none":
		if s.ImplicitTLS {
			return Settings{}, errors.New("tls=none contradicts smtps://")
		}
		if !loopback(s.Host) {
			return Settings{}, errors.New("tls=none is allowed only for a mail server on this machine (loopback): a password and reset links must not cross a network unencrypted")
		}
		s.PlainText = true
	default:
		return Settings{}, fmt.Errorf("tls=%q: the only value is none", q.Get("tls"))
	}
	if passwordFile != "" {
		b, err := os.ReadFile(passwordFile)
		if err != nil {
			return Settings{}, fmt.Errorf("reading the password file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		s.Password = strings.TrimSuffix(line, "\r")
	}
	return s, nil
}

// loopback reports whether host names this machine: localhost or a
// loopback address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Message is one e-mail. Kind names it in the log, which never holds its
// words, its links or its recipient's full address.
type Message struct {
	Kind    string
	To      string
	Subject string
	Text    string
	HTML    string
}

// Sending limits.
const (
	// queueSize bounds the e-mails waiting: beyond, new ones are dropped
	// (and logged), never held in a request.
	queueSize = 256
	// sendTimeout bounds one attempt, connection to QUIT.
	sendTimeout = 30 * time.Second
	// maxAttempts and the backoff between them (firstRetry, doubled each
	// time up to maxRetryWait) give a mail server about two hours to
	// come back.
	maxAttempts  = 10
	firstRetry   = 30 * time.Second
	maxRetryWait = 30 * time.Minute
)

// Sender queues e-mails and sends them on its own goroutine (Run).
type Sender struct {
	settings Settings
	log      *slog.Logger
	// retryAfter is the wait before attempt n+1 (n from 1): the backoff,
	// which tests shorten.
	retryAfter func(n int) time.Duration

	queue chan pending

	mu      sync.Mutex
	waiting int // retries scheduled and not yet back in the queue
}

// pending is a message and how often it was tried.
type pending struct {
	msg      Message
	attempts int
}

// NewSender sends with s, logging to log.
func NewSender(s Settings, log *slog.Logger) *Sender {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sender{settings: s, log: log, retryAfter: backoff, queue: make(chan pending, queueSize)}
}

func backoff(n int) time.Duration {
	wait := firstRetry << min(n-1, 16)
	return min(wait, maxRetryWait)
}

// Send queues m and returns at once. It reports false when the queue is
// full and m was dropped (and logged).
func (s *Sender) Send(m Message) bool {
	select {
	case s.queue <- pending{msg: m}:
		return true
	default:
		s.log.Warn("e-mail dropped: too many waiting to be sent", "kind", m.Kind, "to", domainOf(m.To))
		return false
	}
}

// Run sends what is queued until ctx ends; e-mails still queued then
// are not sent (a person asks again).
func (s *Sender) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-s.queue:
			s.attempt(ctx, p)
		}
	}
}

// attempt sends p once, and schedules it again after a failure the mail
// server may get over.
func (s *Sender) attempt(ctx context.Context, p pending) {
	p.attempts++
	sendCtx, cancel := context.WithTimeout(ctx, sendTimeout)
	err := s.send(sendCtx, p.msg)
	cancel()
	if err == nil {
		s.log.Info("e-mail sent", "kind", p.msg.Kind, "to", domainOf(p.msg.To), "attempts", p.attempts)
		return
	}
	if ctx.Err() != nil {
		return
	}
	if p.attempts >= maxAttempts || permanent(err) {
		s.log.Error("e-mail not sent; giving up", "kind", p.msg.Kind, "to", domainOf(p.msg.To), "attempts", p.attempts, "err", err)
		return
	}
	wait := s.retryAfter(p.attempts)
	s.log.Warn("e-mail not sent; trying again", "kind", p.msg.Kind, "to", domainOf(p.msg.To), "attempts", p.attempts, "in", wait.String(), "err", err)
	s.mu.Lock()
	s.waiting++
	s.mu.Unlock()
	time.AfterFunc(wait, func() {
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
		select {
		case s.queue <- p:
		default:
			s.log.Warn("e-mail dropped: too many waiting to be sent", "kind", p.msg.Kind, "to", domainOf(p.msg.To))
		}
	})
}

// permanent reports whether the mail server refused for good, with a 5xx
// answer: trying again would get the same answer. A connection refused, a
// timeout or a 4xx answer may pass.
func permanent(err error) bool {
	var se *gomail.SendError
	return errors.As(err, &se) && se.ErrorCode() >= 500 && se.ErrorCode() < 600
}

// send makes one connection and sends m over it.
func (s *Sender) send(ctx context.Context, m Message) error {
	msg := gomail.NewMsg()
	if err := msg.From(s.settings.From); err != nil {
		return fmt.Errorf("the sender's address: %w", err)
	}
	if err := msg.To(m.To); err != nil {
		return fmt.Errorf("the recipient's address: %w", err)
	}
	msg.Subject(m.Subject)
	msg.SetDate()
	msg.SetMessageID()
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	}
	opts := []gomail.Option{gomail.WithPort(s.settings.Port), gomail.WithTimeout(sendTimeout)}
	switch {
	case s.settings.ImplicitTLS:
		opts = append(opts, gomail.WithSSL())
	case s.settings.PlainText:
		opts = append(opts, gomail.WithTLSPolicy(gomail.NoTLS))
	default:
		opts = append(opts, gomail.WithTLSPolicy(gomail.TLSMandatory))
	}
	if s.settings.TLS != nil {
		cfg := s.settings.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = s.settings.Host
		}
		opts = append(opts, gomail.WithTLSConfig(cfg))
	}
	if s.settings.Username != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthAutoDiscover),
			gomail.WithUsername(s.settings.Username), gomail.WithPassword(s.settings.Password))
	}
	c, err := gomail.NewClient(s.settings.Host, opts...)
	if err != nil {
		return err
	}
	return c.DialAndSendWithContext(ctx, msg)
}

// domainOf is what the log says of an address: its domain, enough to tell
// which mail server refused, and nothing that names the person.
func domainOf(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return "…" + addr[i:]
	}
	return "…"
}
