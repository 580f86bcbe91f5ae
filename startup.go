package main

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strings"

	"herald/pg"
)

// logStartup writes the line that says the server is up, with what a
// person needs first: the address to open and who may register; and,
// while no account can administer, the command that makes one.
func logStartup(ctx context.Context, logger *slog.Logger, cfg *config, db store, addr net.Addr, https bool, tlsURL string, registration string) {
	// Before the line that says the server is up, which scripts (and
	// tests) wait for: by then the whole advice is in the log.
	if has, err := db.HasAdministrator(ctx); err != nil {
		logger.Warn("cannot tell whether an administrator exists", "err", err)
	} else if !has {
		command, when := adminCreateCommand(cfg.dbPath)
		logger.Warn("no administrator yet: make one on this machine", "command", command, "when", when)
	}
	build := currentBuild()
	logger.Info("listening", "addr", addr.String(), "url", openURL(cfg, addr, https, tlsURL), "registration", registration,
		"db", storeName(cfg.dbPath), "version", build.Version, "commit", build.Commit)
}

// openURL is the address a person opens in a browser to reach the server
// listening on addr: --public-url when it is set, else the domain HTTPS
// serves (tlsURL, with --tls-domain), else addr, over HTTPS when https
// (certificate files) or plain HTTP, with this machine's loopback address
// for a listener on every address.
func openURL(cfg *config, addr net.Addr, https bool, tlsURL string) string {
	if cfg.publicURL != "" {
		return strings.TrimSuffix(cfg.publicURL, "/") + "/"
	}
	if tlsURL != "" {
		return tlsURL
	}
	scheme := "http://"
	if https {
		scheme = "https://"
	}
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return scheme + addr.String() + "/"
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return scheme + net.JoinHostPort(host, port) + "/"
}

// adminCreateCommand is the command that makes the first administrator
// of the database at dbPath, and when to run it: a bbolt file is opened
// by the tool only while the server is stopped; a PostgreSQL URL's
// password is not repeated.
func adminCreateCommand(dbPath string) (command, when string) {
	if pg.IsURL(dbPath) {
		return "herald admin create --db " + shellQuote(pg.Redact(dbPath)) + " you@example.com",
			"the server may keep running; the database's password in PGPASSWORD"
	}
	return "herald admin create --db " + shellQuote(dbPath) + " you@example.com", "with the server stopped"
}

// shellQuote quotes s for a POSIX shell when it holds anything but the
// characters of a plain path.
func shellQuote(s string) string {
	plain := s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:@,=", r))
	}) < 0
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
