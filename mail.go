package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/mail"
	"net/url"

	heraldmail "herald/mail"
)

// mailFlags say whether and how Herald sends e-mail (off unless --smtp).
type mailFlags struct {
	smtp             string
	smtpPasswordFile string
	mailFrom         string
	// settings is what validate made of the flags (zero without --smtp).
	settings heraldmail.Settings
}

func (c *mailFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.smtp, "smtp", "", "send e-mail (password-reset links) through this mail server: smtp://user:password@host:port with STARTTLS (port 587 unless given), smtps://... with TLS (465); ?tls=none only for a server on this machine; needs --public-url; off when empty (`URL`)")
	fs.StringVar(&c.smtpPasswordFile, "smtp-password-file", "", "with --smtp, the mail server's password is this file's first line, in place of the URL's (`FILE`)")
	fs.StringVar(&c.mailFrom, "mail-from", "", "with --smtp, the address e-mails come from, such as \"Herald <herald@example.com>\"; herald@ the --public-url's host when empty (`ADDRESS`)")
}

// validate checks the flags against publicURL, which links in e-mails
// need: never a request's Host header, which anyone can set.
func (c *mailFlags) validate(publicURL string) error {
	if c.smtp == "" {
		switch {
		case c.smtpPasswordFile != "":
			return configError("smtp-password-file", "needs --smtp")
		case c.mailFrom != "":
			return configError("mail-from", "needs --smtp")
		}
		return nil
	}
	s, err := heraldmail.ParseURL(c.smtp, c.smtpPasswordFile)
	if err != nil {
		return configError("smtp", err.Error())
	}
	if publicURL == "" {
		return configError("smtp", "needs --public-url: links in e-mails point there, never to whatever address a request named")
	}
	from := c.mailFrom
	if from == "" {
		u, _ := url.Parse(publicURL) // checked by validate before
		from = "Herald <herald@" + u.Hostname() + ">"
	}
	if _, err := mail.ParseAddress(from); err != nil {
		return configError("mail-from", fmt.Sprintf("%q is not an e-mail address", from))
	}
	s.From = from
	c.settings = s
	return nil
}

// startMail starts sending e-mail when --smtp says to: it returns the
// sender and a function that stops it (e-mails still queued then are not
// sent), or nil and a function that does nothing.
func startMail(c *mailFlags, logger *slog.Logger) (*heraldmail.Sender, func()) {
	if c.smtp == "" {
		return nil, func() {}
	}
	sender := heraldmail.NewSender(c.settings, logger.With("component", "mail"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		sender.Run(ctx)
	}()
	return sender, func() { cancel(); <-done }
}
