// Command herald is a small messaging service with user accounts, in one
// executable with an embedded database.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"herald/auth"
	"herald/bolt"
	heraldhttp "herald/http"
	"herald/http/connlimit"
	"herald/http/netquirk"
	"herald/http/stream"
	"herald/pg"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

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
	auditKeepFor    time.Duration
	auditKeepMax    int
	writesPerAcct   auth.Rate
	retain          time.Duration
	metricsAddr     string
	pprof           bool
	streamsPerUser  int
	streams         int
	changesKeepFor  time.Duration
	changesKeepMax  int
	loginPerAccount auth.Rate
	loginPerAddress auth.Rate
	registerPerAddr auth.Rate
	connsPerAddr    int
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
	fs.Var(registrationFlag{&c.registration}, "registration", "who may register: anyone (open), whoever holds an invitation (invite), or nobody (closed) (`open|invite|closed`)")
	fs.StringVar(&c.publicURL, "public-url", "", "the address people reach this server at, such as https://herald.example.com, for the links of invitations and password resets; empty: the address each request was made to (`URL`)")
	c.auditKeepFor, c.auditKeepMax = 365*24*time.Hour, 100000
	fs.Var(durationFlag{&c.auditKeepFor}, "audit-keep", "how long the audit log keeps administrators' acts (`DURATION`)")
	fs.IntVar(&c.auditKeepMax, "audit-max", c.auditKeepMax, "most administrators' acts the audit log keeps, whatever their age (`N`)")
	fs.StringVar(&c.admins, "admins", "", "only for the first start after upgrading from a release that named administrators this way: these e-mails' accounts are then made administrators, stored with the account; on any other start it is refused, so remove it afterwards (`EMAILS`)")
	fs.StringVar(&c.trustedProxies, "trusted-proxies", "", "comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For is believed, e.g. 127.0.0.1,::1 (`CIDRS`)")
	c.loginPerAccount, c.loginPerAddress, c.registerPerAddr = auth.LoginFailuresPerAccount(), auth.LoginFailuresPerAddress(), auth.RegistrationsPerAddress()
	c.writesPerAcct = auth.WritesPerAccount()
	fs.Var(rateFlag{&c.writesPerAcct}, "writes-per-account", "creates, edits and deletes one account may make: a burst, then one more per interval; administrators are not limited (`BURST/INTERVAL`)")
	fs.Var(rateFlag{&c.loginPerAccount}, "login-failures-per-account", "failed logins allowed per account: a burst, then one more per interval (`BURST/INTERVAL`)")
	fs.Var(rateFlag{&c.loginPerAddress}, "login-failures-per-address", "failed logins allowed per client address (`BURST/INTERVAL`)")
	fs.Var(rateFlag{&c.registerPerAddr}, "registrations-per-address", "registrations allowed per client address (`BURST/INTERVAL`)")
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
	case c.auditKeepMax < 1:
		return configError("audit-max", "must be at least 1")
	}
	if c.publicURL != "" {
		if u, err := url.Parse(c.publicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return configError("public-url", "must be an address like https://herald.example.com")
		}
	}
	if _, err := parsePrefixes(c.trustedProxies); err != nil {
		return configError("trusted-proxies", err.Error())
	}
	return nil
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

// errLegacyAdmins refuses --admins where there is nothing to upgrade.
var errLegacyAdmins = errors.New("--admins (HERALD_ADMINS) is no longer read: administrators are stored with their accounts. Remove it, and make administrators with herald admin grant|create --db FILE EMAIL while the server is stopped")

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
	return fmt.Sprintf("%d/%s", f.rate.Burst, shortDuration(f.rate.Every))
}

func (f rateFlag) Set(s string) error {
	burst, every, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(burst)
	if !ok || err != nil || n < 1 {
		return fmt.Errorf("want burst/interval such as 10/5m, with a burst of at least 1")
	}
	d, err := time.ParseDuration(every)
	if err != nil || d <= 0 {
		return fmt.Errorf("want burst/interval such as 10/5m, with a positive interval")
	}
	*f.rate = auth.Rate{Burst: n, Every: d}
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

// run is the whole program, parameterised so tests can drive it: it serves
// until ctx ends, then shuts down gracefully and returns the exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "help" {
		// "herald help" and "herald help migrate", as git and go read them.
		// A new slice: args' array is the caller's.
		if len(args) > 1 {
			args = []string{args[1], "--help"}
		} else {
			args = []string{"--help"}
		}
	}
	if len(args) > 0 && isVersionCommand(args[0]) {
		return runVersion(args[1:], stdout, stderr)
	}
	if len(args) > 0 {
		if t, ok := tools()[args[0]]; ok {
			return runTool(t, args[1:], getenv, stdout, stderr)
		}
		if args[0] == "admin" {
			return runAdmin(ctx, args[1:], getenv, stdin, stdout, stderr)
		}
		if args[0] == "migrate" {
			return runMigrate(ctx, args[1:], getenv, stdout, stderr)
		}
		if args[0] == "serve" {
			args = args[1:]
		}
	}
	cfg, err := parseConfig(args, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "herald:", err)
		return 2
	}
	// The log is batched: a write(2) for every request's access log line
	// was 7% of the server's CPU under load. Lines still reach stderr
	// within logFlushInterval, and Close writes the rest before run returns.
	logOut := heraldhttp.NewLogWriter(stderr, logFlushInterval)
	var logHandler slog.Handler = slog.NewTextHandler(logOut, nil)
	if cfg.logFormat == "json" {
		// Durations in milliseconds, which log tools graph, not the
		// nanosecond integers slog's JSON writes by default.
		logHandler = slog.NewJSONHandler(logOut, &slog.HandlerOptions{ReplaceAttr: durationsInMillis})
	}
	logger := slog.New(logHandler)
	err = serve(ctx, cfg, getenv, logger)
	_ = logOut.Close() // stderr failing leaves nowhere to say so
	if err != nil {
		// One line an operator can act on, whatever the log format.
		fmt.Fprintln(stderr, "herald:", plainError(err))
		return 1
	}
	return 0
}

// logFlushInterval is the longest a log line waits in memory.
const logFlushInterval = 200 * time.Millisecond

// durationsInMillis rewrites a duration attribute as a number of
// milliseconds, its key suffixed _ms so the unit travels with it.
func durationsInMillis(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.Float64(a.Key+"_ms", float64(a.Value.Duration())/float64(time.Millisecond))
	}
	return a
}

// setMemoryLimit gives the Go runtime a soft heap limit. Every password
// hash allocates a fresh 19 MiB block, and with the collector's default
// pacing freed blocks pile up: without a limit, 64 concurrent logins on two
// hashing slots peaked at 119 MiB of anonymous memory. With the limit the
// collector runs before the heap outgrows what the slots really hold.
// GOMEMLIMIT, when the operator sets it, is left alone.
func setMemoryLimit(cfg *config, getenv func(string) string, logger *slog.Logger) {
	if getenv("GOMEMLIMIT") != "" {
		return
	}
	mib := cfg.memoryLimitMiB
	if mib == 0 {
		mib = 24 + 24*cfg.hashConcurrency
	}
	debug.SetMemoryLimit(int64(mib) << 20)
	logger.Debug("memory limit set", "mib", mib)
	// Under the limit, collecting each time the heap doubles (GOGC=100)
	// spends CPU to stay far below memory already granted: with a live
	// heap of ~15 MiB, a read-heavy server collected several times a
	// second. Letting it grow 4x between collections cut that (reads
	// 7-27% faster in bench/scale.sh); the limit still caps the heap.
	// GOGC, when the operator sets it, is left alone.
	if getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// storeOptions configures the store for a machine of cpus CPUs, its
// commits reported to set when metrics are on (set may be nil).
func storeOptions(cpus int, logger *slog.Logger, set *metrics.Set) bolt.Options {
	// Long searches are limited by CPUs, not by scheduler slots (see
	// setProcs): at most half the machine goes to them.
	opts := bolt.Options{Logger: logger, LongSearches: max(1, cpus/2)}
	if set != nil {
		commitTime := set.NewHistogram("herald_db_commit_duration_seconds")
		commitWrites := set.NewHistogram("herald_db_commit_writes")
		opts.OnCommit = func(took time.Duration, writes int) {
			commitTime.Update(took.Seconds())
			commitWrites.Update(float64(writes))
		}
	}
	return opts
}

// setProcs gives the Go scheduler more slots (Ps) than there are CPUs and
// returns the CPUs it found. With one P per CPU a goroutine that becomes
// runnable — a request whose bytes arrived, the group committer back from
// fsync — waits in Go's run queue until a running goroutine yields: under
// load on two CPUs, goroutines waited 1.0-1.3 ms at p90 and 3.1-3.7 ms at
// p99 (runtime/metrics /sched/latencies), and that wait was most of the
// read p99s of bench/scale.sh. With twice the Ps the kernel, which
// preempts at a finer grain, shares the CPUs between their threads: the
// waits halved, the read p99s with them, at the same throughput (see
// docs/PERFORMANCE.md). GOMAXPROCS, when the operator sets it, is left
// alone.
func setProcs(cfg *config, getenv func(string) string, logger *slog.Logger) (cpus int) {
	if getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	// The runtime's own choice, the CPUs this process may use (container
	// limits included), whatever an earlier serve in this process set:
	// twice the current value would double again on every call.
	runtime.SetDefaultGOMAXPROCS()
	cpus = runtime.GOMAXPROCS(0)
	procs := cfg.procs
	if procs == 0 {
		procs = 2 * cpus
	}
	runtime.GOMAXPROCS(procs)
	logger.Debug("scheduler slots set", "procs", procs, "cpus", cpus)
	return cpus
}

// serve opens the database and answers HTTP until ctx ends.
func serve(ctx context.Context, cfg *config, getenv func(string) string, logger *slog.Logger) (err error) {
	// The port first: a server that cannot listen must leave nothing
	// behind, not a new empty database file.
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", cfg.addr, err)
	}
	defer ln.Close() // after Serve has closed it, a no-op
	// Metrics live in one set made here and handed to the packages that
	// record them; nothing registers itself globally.
	var set *metrics.Set
	var metricsLn net.Listener
	if cfg.metricsAddr != "" {
		if metricsLn, err = net.Listen("tcp", cfg.metricsAddr); err != nil {
			return fmt.Errorf("cannot listen on %s for metrics: %w", cfg.metricsAddr, err)
		}
		defer metricsLn.Close()
		set = metrics.NewSet()
	}
	db, err := openStore(ctx, cfg, setProcs(cfg, getenv, logger), logger, set)
	if err != nil {
		return err
	}
	// Closing waits for transactions in flight; only then is the file
	// consistent and the stop clean.
	defer func() {
		if closeErr := db.close(); closeErr != nil {
			err = errors.Join(err, fmt.Errorf("closing database: %w", closeErr))
		}
		if err == nil {
			logger.Info("stopped cleanly")
		}
	}()

	// The store's background chores: last-use times of tokens, the sweep
	// of expired ones. They stop before the database closes.
	choresCtx, stopChores := context.WithCancel(context.Background())
	choresDone := make(chan struct{})
	go func() {
		defer close(choresDone)
		db.maintain(choresCtx, choresFor(cfg), func(chore string, err error) {
			logger.Warn(chore, "err", err)
		})
	}()
	defer func() { stopChores(); <-choresDone }()

	setMemoryLimit(cfg, getenv, logger)
	proxies, _ := parsePrefixes(cfg.trustedProxies) // validated with the flags
	hashQueue := cfg.hashQueue
	if hashQueue == 0 {
		hashQueue = auth.DefaultWaitingPerSlot * cfg.hashConcurrency
	}
	hasher := auth.NewHasherQueue(auth.DefaultParams(), cfg.hashConcurrency, hashQueue)
	if set != nil {
		registerBuildInfo(set, currentBuild())
		set.NewGauge("herald_hash_computing", func() float64 { c, _ := hasher.Load(); return float64(c) })
		set.NewGauge("herald_hash_waiting", func() float64 { _, w := hasher.Load(); return float64(w) })
		db.gauges(set)
		mux := http.NewServeMux()
		mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			set.WritePrometheus(w)
			metrics.WriteProcessMetrics(w) // go_* and process_*: memory, GC, open files
		})
		if cfg.pprof {
			// On this listener's own mux. (net/http/pprof's init also puts
			// them on http.DefaultServeMux, which Herald never serves.)
			mux.HandleFunc("GET /debug/pprof/", pprof.Index)
			mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
		}
		msrv := &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 5 * time.Second,
			// Long enough for a 60 s CPU profile.
			WriteTimeout: 90 * time.Second,
		}
		go func() { _ = msrv.Serve(metricsLn) }()
		defer msrv.Close()
		logger.Info("metrics listening", "addr", metricsLn.Addr().String())
	}
	handler := heraldhttp.NewServer(db.Store, hasher, heraldhttp.Config{
		Metrics:      set,
		TokenTTL:     cfg.tokenTTL,
		MaxBodyBytes: cfg.maxBody,
		Logger:       logger,
		Registration: cfg.registration,
		PublicURL:    cfg.publicURL,
		Version:      strings.TrimPrefix(currentBuild().String(), "herald "),
		Streams:      stream.Limits{PerUser: cfg.streamsPerUser, Total: cfg.streams},
		Limits: heraldhttp.Limits{
			LoginFailuresPerAccount: cfg.loginPerAccount,
			LoginFailuresPerAddress: cfg.loginPerAddress,
			RegistrationsPerAddress: cfg.registerPerAddr,
			WritesPerAccount:        cfg.writesPerAcct,
			TrustedProxies:          proxies,
			Shared:                  db.limits,
		},
	})
	// Every request's context descends from requestsCtx, so cancelling it
	// reaches every handler still running: searches stop at their next
	// check, waits for a hashing slot end.
	requestsCtx, cancelRequests := context.WithCancel(context.Background())
	defer cancelRequests()
	srv := &http.Server{
		Handler:           handler,
		BaseContext:       func(net.Listener) context.Context { return requestsCtx },
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	build := currentBuild()
	logger.Info("listening", "addr", ln.Addr().String(), "db", db.name, "version", build.Version, "commit", build.Commit)

	var onRefuse func()
	if set != nil {
		onRefuse = set.NewCounter("herald_connections_refused_total").Inc
	}
	// The trusted proxies' connections carry many clients' requests; the
	// limit is for clients that reach Herald themselves.
	limited := connlimit.Limit(srv, ln, connlimit.Options{
		PerAddress: cfg.connsPerAddr, Exempt: proxies, Logger: logger, OnRefuse: onRefuse})
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(netquirk.CoalesceWrites(srv, limited)) }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down", "timeout", cfg.shutdownTimeout)
	// Streams never finish on their own, and live on connections taken
	// from net/http, which Shutdown does not wait for: end them first, each
	// with a hint to reconnect, so the hints go out before the process ends.
	handler.CloseStreams()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		// Out of patience: cancel what still runs and drop its connections,
		// so closing the database below does not wait on it.
		cancelRequests()
		_ = srv.Close()
		return fmt.Errorf("shutdown: %w; requests still running were cancelled", err)
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
