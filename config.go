package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"herald/auth"
	"herald/chores"
	heraldhttp "herald/http"
	"herald/http/connlimit"
	"herald/http/stream"
	"herald/model"
	"herald/pg"
	"herald/push"
)

// config is everything a run can be told by flags or HERALD_* variables.
type config struct {
	addr            string
	dbPath          string // a bbolt file, or a PostgreSQL URL
	dbPool          int
	dbTimeout       time.Duration
	tokenTTL        time.Duration
	maxBody         int64
	hashConcurrency int
	shutdownTimeout time.Duration
	logFormat       string
	hashQueue       int
	memoryLimitMiB  int
	procs           int
	trustedProxies  string // comma-separated CIDRs, checked by validate
	admins          string // comma-separated e-mails, read only to upgrade an older database
	registration    heraldhttp.Registration
	publicURL       string
	// pushContact turns Web Push on: the VAPID subject push services may
	// write to (see push.CheckContact); pushAllowPrivate lets
	// subscriptions reach private addresses.
	pushContact      string
	pushAllowPrivate bool
	auditKeepFor     time.Duration
	auditKeepMax     int
	// notificationsKeep is how long notifications are kept.
	notificationsKeep time.Duration
	writesPerAcct     auth.Rate
	retain            time.Duration
	metricsAddr       string
	pprof             bool
	streamsPerUser    int
	streams           int
	changesKeepFor    time.Duration
	changesKeepMax    int
	loginPerAccount   auth.Rate
	loginPerAddress   auth.Rate
	registerPerAddr   auth.Rate
	connsPerAddr      int
	tlsFlags          // HTTPS: see tls.go
	mailFlags         // e-mail: see mail.go
}

// parseConfig reads flags, falling back to HERALD_* variables, falling back
// to defaults: a flag beats its variable. It returns flag.ErrHelp for --help.
func parseConfig(args []string, getenv func(string) string, stdout, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("herald", flag.ContinueOnError)
	// The flag package would print errors and usage itself, to one writer;
	// run prints them instead: help to stdout, errors to stderr.
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "address to listen on; :0 picks a free port (`HOST:PORT`)")
	fs.StringVar(&c.dbPath, "db", "herald.db", "database: a bbolt file, created on first start, or a PostgreSQL URL (postgres://... or postgresql://..., pgx syntax; a Unix socket as postgres:///herald?host=/run/postgresql) for more than one instance (`FILE|URL`)")
	fs.IntVar(&c.dbPool, "db-pool", 0, "with a PostgreSQL --db, the most connections this instance opens; 0 means the URL's pool_max_conns, else four per CPU, at least eight (`N`)")
	c.dbTimeout = pg.DefaultTimeout
	fs.Var(durationFlag{&c.dbTimeout}, "db-timeout", "how long the database work of each call a request makes may take before the request answers 503; a write whose commit was under way then answers that its outcome is unknown (`DURATION`)")
	c.tokenTTL, c.shutdownTimeout = heraldhttp.DefaultTokenTTL, 10*time.Second
	fs.Var(durationFlag{&c.tokenTTL}, "token-ttl", "lifetime of issued tokens, such as 720h or 30d (`DURATION`)")
	fs.Int64Var(&c.maxBody, "max-body", heraldhttp.DefaultMaxBodyBytes, "largest accepted request body in bytes (`BYTES`)")
	fs.IntVar(&c.hashConcurrency, "hash-concurrency", runtime.NumCPU(), "password hashes computed at once; budget about 24 MiB of memory for each (`N`)")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at /metrics on this address, a listener of its own; off when empty (`HOST:PORT`)")
	fs.BoolVar(&c.pprof, "pprof", false, "also serve Go's profiler at /debug/pprof/ on the metrics listener, for diagnosing a slow server; needs --metrics-addr")
	fs.Var(durationFlag{&c.retain}, "retain", "delete messages older than this, such as 30d or 8760h; 0 keeps them all (`DURATION`)")
	fs.Var(durationFlag{&c.shutdownTimeout}, "shutdown-timeout", "how long requests in flight may finish on SIGINT/SIGTERM before they are cancelled (`DURATION`)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json (`text|json`)")
	fs.IntVar(&c.hashQueue, "hash-queue", 0, "logins that may wait for a hashing slot before the rest get 503; 0 means 32 per slot (`N`)")
	fs.IntVar(&c.memoryLimitMiB, "memory-limit", 0, "soft limit on the Go heap in MiB; 0 means 24 + 24 per hashing slot; GOMEMLIMIT, when set, wins (`MIB`)")
	fs.IntVar(&c.procs, "procs", 0, "goroutines the Go runtime runs at once (its GOMAXPROCS); 0 means twice the CPUs available; GOMAXPROCS, when set, wins (`N`)")
	fs.IntVar(&c.streamsPerUser, "max-streams-per-user", stream.DefaultPerUser, "live streams one account may hold open at once (`N`)")
	fs.IntVar(&c.connsPerAddr, "max-conns-per-address", connlimit.DefaultPerAddress, "connections one client address (an IPv6 /64) may hold open at once, live streams aside; more are closed unanswered; --trusted-proxies are not limited; 0 means no limit (`N`)")
	fs.IntVar(&c.streams, "max-streams", stream.DefaultTotal, "live streams open at once in all; each costs a connection, so raise the file limit (ulimit -n) with it (`N`)")
	c.changesKeepFor = 7 * 24 * time.Hour
	fs.Var(durationFlag{&c.changesKeepFor}, "changes-keep", "how long the change log keeps changes for streams resuming with Last-Event-ID; older positions get a reset event (`DURATION`)")
	fs.IntVar(&c.changesKeepMax, "changes-max", 100000, "most changes the change log keeps, whatever their age (`N`)")
	c.registration = heraldhttp.RegistrationOpen
	fs.Var(registrationFlag{&c.registration}, "registration", "who may register: anyone (open), whoever holds an invitation (invite), or nobody (closed); only for a database that holds no such setting: an administrator's change (GET/PATCH /api/admin/settings) wins (`open|invite|closed`)")
	fs.StringVar(&c.publicURL, "public-url", "", "the address people reach this server at, such as https://herald.example.com, for the links of invitations and password resets; empty: the address each request was made to (`URL`)")
	fs.StringVar(&c.pushContact, "push-contact", "", "turns Web Push on: a mailto: or https: URL where push services can reach this server's operator, sent to them as given (the VAPID subject); off when empty (`URL`)")
	fs.BoolVar(&c.pushAllowPrivate, "push-allow-private", false, "let push subscriptions' endpoints be on loopback, private, link-local or other non-public addresses, for tests and push services on a private network; otherwise refused when subscribing and again before each connection")
	c.mailFlags.register(fs)
	c.auditKeepFor, c.auditKeepMax = 365*24*time.Hour, 100000
	fs.Var(durationFlag{&c.auditKeepFor}, "audit-keep", "how long the audit log keeps administrators' acts (`DURATION`)")
	fs.IntVar(&c.auditKeepMax, "audit-max", c.auditKeepMax, "most administrators' acts the audit log keeps, whatever their age (`N`)")
	c.notificationsKeep = model.DefaultNotificationsKeep
	fs.Var(durationFlag{&c.notificationsKeep}, "notifications-keep", "how long notifications are kept; an account keeps its newest 1000 whatever their age (`DURATION`)")
	fs.StringVar(&c.admins, "admins", "", "only for the first start after upgrading from a release that named administrators this way: these e-mails' accounts are then made administrators, stored with the account; on any other start it is refused, so remove it afterwards (`EMAILS`)")
	fs.StringVar(&c.trustedProxies, "trusted-proxies", "", "comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For is believed, e.g. 127.0.0.1,::1 (`CIDRS`)")
	c.loginPerAccount, c.loginPerAddress, c.registerPerAddr = auth.LoginFailuresPerAccount(), auth.LoginFailuresPerAddress(), auth.RegistrationsPerAddress()
	c.writesPerAcct = auth.WritesPerAccount()
	fs.Var(rateFlag{&c.writesPerAcct}, "writes-per-account", "creates, edits and deletes one account may make: a burst, then one more per interval; administrators are not limited; only for a database that holds no such setting: an administrator's change (GET/PATCH /api/admin/settings) wins (`BURST/INTERVAL`)")
	fs.Var(rateFlag{&c.loginPerAccount}, "login-failures-per-account", "failed logins allowed per account: a burst, then one more per interval (`BURST/INTERVAL`)")
	fs.Var(rateFlag{&c.loginPerAddress}, "login-failures-per-address", "failed logins allowed per client address (`BURST/INTERVAL`)")
	fs.Var(rateFlag{&c.registerPerAddr}, "registrations-per-address", "registrations allowed per client address (`BURST/INTERVAL`)")
	c.tlsFlags.register(fs)
	usage := func(out io.Writer) {
		fmt.Fprintf(out, "Usage: herald [serve] [flags]\n       herald check --db FILE\n       herald backup --db FILE OUT\n       herald compact --db FILE OUT\n       herald migrate --db FILE --to URL\n       herald admin grant|create|revoke ...\n       herald version (also --version or -v)\n\nHerald serves a messaging API with user accounts on one embedded database, or,\nfor more than one instance, on PostgreSQL.\ncheck, backup and compact work on a stopped server's bbolt file; migrate copies\none into an empty PostgreSQL database; admin manages administrators; each has --help\n(or: herald help COMMAND).\n\nServe flags (each also read from the HERALD_* variable shown; a flag beats its variable):\n")
		fs.VisitAll(func(f *flag.Flag) {
			// The placeholder is shown once, after the flag; the text
			// keeps the word without its backquotes.
			name, _ := flag.UnquoteUsage(f)
			usage := strings.TrimSuffix(f.Usage, " (`"+name+"`)")
			def := ""
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" {
				def = "default " + f.DefValue + "; "
			}
			fmt.Fprintf(out, "  --%s %s\n    \t%s (%senv %s)\n", f.Name, name, usage, def, envName(f.Name))
		})
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return nil, err
		}
		// The flag package names flags with one dash; help uses two.
		msg := flagDashRE.ReplaceAllString(err.Error(), "$1 --")
		return nil, fmt.Errorf("%s; see herald --help", msg)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q; see herald --help", fs.Arg(0))
	}
	set := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || envErr != nil {
			return
		}
		if v := getenv(envName(f.Name)); v != "" {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("invalid value %q for %s: %v", v, envName(f.Name), err)
			}
		}
	})
	if envErr != nil {
		return nil, envErr
	}
	return c, c.validate()
}

// validate names both the flag and its variable, since either may have set
// the value.
func (c *config) validate() error {
	switch {
	case c.addr == "":
		return configError("addr", "must not be empty")
	case c.dbPath == "":
		return configError("db", "must not be empty")
	case c.dbPool < 0:
		return configError("db-pool", "must not be negative")
	case c.dbTimeout <= 0:
		return configError("db-timeout", "must be positive")
	case c.tokenTTL <= 0:
		return configError("token-ttl", "must be positive")
	case c.maxBody < 1024:
		return configError("max-body", "must be at least 1024 bytes")
	case c.hashConcurrency < 1:
		return configError("hash-concurrency", "must be at least 1")
	case c.shutdownTimeout < 0:
		return configError("shutdown-timeout", "must not be negative")
	case c.logFormat != "text" && c.logFormat != "json":
		return configError("log-format", "must be text or json")
	case c.hashQueue < 0:
		return configError("hash-queue", "must not be negative")
	case c.retain < 0:
		return configError("retain", "must not be negative")
	case c.memoryLimitMiB < 0:
		return configError("memory-limit", "must not be negative")
	case c.procs < 0:
		return configError("procs", "must not be negative")
	case c.streamsPerUser < 1:
		return configError("max-streams-per-user", "must be at least 1")
	case c.streams < 1:
		return configError("max-streams", "must be at least 1")
	case c.connsPerAddr < 0:
		return configError("max-conns-per-address", "must not be negative")
	case c.changesKeepFor <= 0:
		return configError("changes-keep", "must be positive")
	case c.changesKeepMax < 1:
		return configError("changes-max", "must be at least 1")
	case c.pprof && c.metricsAddr == "":
		return configError("pprof", "needs --metrics-addr, the listener it is served on")
	case c.auditKeepFor <= 0:
		return configError("audit-keep", "must be positive")
	case c.notificationsKeep <= 0:
		return configError("notifications-keep", "must be positive")
	case c.auditKeepMax < 1:
		return configError("audit-max", "must be at least 1")
	}
	if c.publicURL != "" {
		if u, err := url.Parse(c.publicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return configError("public-url", "must be an address like https://herald.example.com")
		}
	}
	if c.pushContact != "" {
		if err := push.CheckContact(c.pushContact); err != nil {
			return configError("push-contact", "must be a mailto: URL (mailto:admin@example.com) or an https: URL")
		}
	}
	if c.pushAllowPrivate && c.pushContact == "" {
		return configError("push-allow-private", "needs --push-contact, which turns Web Push on")
	}
	if _, err := parsePrefixes(c.trustedProxies); err != nil {
		return configError("trusted-proxies", err.Error())
	}
	if err := c.mailFlags.validate(c.publicURL); err != nil {
		return err
	}
	return c.tlsFlags.validate()
}

// choresFor says what the chores keep by cfg's flags, run as often as
// package chores says.
func choresFor(cfg *config) chores.Config {
	return chores.Config{FlushEvery: chores.FlushEvery, SweepEvery: chores.SweepEvery, Retain: cfg.retain,
		ChangesKeepFor: cfg.changesKeepFor, ChangesKeepMax: cfg.changesKeepMax,
		AuditKeepFor: cfg.auditKeepFor, AuditKeepMax: cfg.auditKeepMax, NotificationsKeepFor: cfg.notificationsKeep}
}

// legacyAdmins is the e-mails --admins names.
func (c *config) legacyAdmins() []string { return splitList(c.admins) }

// proxies is --trusted-proxies, which validate has checked.
func (c *config) proxies() []netip.Prefix {
	p, _ := parsePrefixes(c.trustedProxies)
	return p
}

// splitList reads a comma-separated list, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// parsePrefixes reads comma-separated CIDRs; a bare address means just
// that address.
func parsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range splitList(s) {
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return nil, fmt.Errorf("has %q, which is neither a CIDR like 10.0.0.0/8 nor an address", part)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// registrationFlag reads a registration mode.
type registrationFlag struct{ mode *heraldhttp.Registration }

func (f registrationFlag) String() string {
	if f.mode == nil {
		return ""
	}
	return string(*f.mode)
}

func (f registrationFlag) Set(s string) error {
	m, err := heraldhttp.ParseRegistration(s)
	if err != nil {
		return err
	}
	*f.mode = m
	return nil
}

// flagDashRE finds a flag name as the flag package writes it in errors.
var flagDashRE = regexp.MustCompile(`(defined:|flag|argument:) -`)

// durationFlag reads a duration as Go writes them (90s, 1h30m) or in days
// (30d), which is how people think of token lifetimes and retention, and
// shows it the short way (720h, not 720h0m0s).
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil {
		return ""
	}
	return shortDuration(*f.d)
}

func (f durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}

// parseDuration is time.ParseDuration plus whole days: "30d", "1d12h".
func parseDuration(s string) (time.Duration, error) {
	days, rest, found := strings.Cut(s, "d")
	if found {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not a duration: write it like 30d, 12h or 1h30m", s)
		}
		d := time.Duration(n) * 24 * time.Hour
		if rest == "" {
			return d, nil
		}
		more, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration: write it like 30d, 12h or 1h30m", s)
		}
		return d + more, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: write it like 30d, 12h or 1h30m", s)
	}
	return d, nil
}

// rateFlag reads an auth.Rate written as burst/interval, such as 10/5m.
type rateFlag struct{ rate *auth.Rate }

func (f rateFlag) String() string {
	if f.rate == nil {
		return ""
	}
	return f.rate.String()
}

func (f rateFlag) Set(s string) error {
	r, err := auth.ParseRate(s)
	if err != nil {
		return err
	}
	*f.rate = r
	return nil
}

// shortDuration writes d the way people do: 5m, 720h, 1h30m, not 5m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func configError(flagName, problem string) error {
	return fmt.Errorf("--%s (%s) %s", flagName, envName(flagName), problem)
}

// envName maps a flag name to its variable: token-ttl → HERALD_TOKEN_TTL.
func envName(flagName string) string {
	return "HERALD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}
