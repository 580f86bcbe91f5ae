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
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"herald/auth"
	"herald/bolt"
	heraldhttp "herald/http"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is everything a run can be told by flags or HERALD_* variables.
type config struct {
	addr            string
	dbPath          string
	tokenTTL        time.Duration
	maxBody         int64
	hashConcurrency int
	shutdownTimeout time.Duration
	logFormat       string
}

// parseConfig reads flags, falling back to HERALD_* variables, falling back
// to defaults: a flag beats its variable. It returns flag.ErrHelp for --help.
func parseConfig(args []string, getenv func(string) string, stdout, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("herald", flag.ContinueOnError)
	// The flag package would print errors and usage itself, to one writer;
	// run prints them instead: help to stdout, errors to stderr.
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "`address` to listen on (host:port)")
	fs.StringVar(&c.dbPath, "db", "herald.db", "`path` of the database file, created on first start")
	fs.DurationVar(&c.tokenTTL, "token-ttl", heraldhttp.DefaultTokenTTL, "lifetime of issued tokens (`duration`, e.g. 720h)")
	fs.Int64Var(&c.maxBody, "max-body", heraldhttp.DefaultMaxBodyBytes, "largest accepted request body, in `bytes`")
	fs.IntVar(&c.hashConcurrency, "hash-concurrency", runtime.NumCPU(), "password hashes computed at once (`n`); each takes about 19 MiB")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long to let requests in flight finish on SIGINT/SIGTERM (`duration`)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json (`format`)")
	usage := func(out io.Writer) {
		fmt.Fprintf(out, "Usage: herald [flags]\n\nHerald serves a messaging API with user accounts on one embedded database.\n\nFlags (each also read from the HERALD_* variable shown; a flag beats its variable):\n")
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(out, "  --%s %s\n    \t%s (default %q, env %s)\n", f.Name, name, usage, f.DefValue, envName(f.Name))
		})
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return nil, err
		}
		return nil, fmt.Errorf("%w; see herald --help", err)
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
	}
	return nil
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
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "herald:", err)
		return 2
	}
	var logHandler slog.Handler = slog.NewTextHandler(stderr, nil)
	if cfg.logFormat == "json" {
		logHandler = slog.NewJSONHandler(stderr, nil)
	}
	logger := slog.New(logHandler)
	if err := serve(ctx, cfg, logger); err != nil {
		logger.Error("herald stopped", "err", err)
		return 1
	}
	return 0
}

// serve opens the database and answers HTTP until ctx ends.
func serve(ctx context.Context, cfg *config, logger *slog.Logger) (err error) {
	db, err := bolt.Open(cfg.dbPath, bolt.Options{Logger: logger})
	if err != nil {
		return err
	}
	// Closing waits for transactions in flight; only then is the file
	// consistent and the stop clean.
	defer func() {
		if closeErr := db.Close(); closeErr != nil {
			err = errors.Join(err, fmt.Errorf("closing database: %w", closeErr))
		}
		if err == nil {
			logger.Info("stopped cleanly")
		}
	}()

	handler := heraldhttp.NewServer(db, auth.NewHasher(auth.DefaultParams(), cfg.hashConcurrency), heraldhttp.Config{
		TokenTTL:     cfg.tokenTTL,
		MaxBodyBytes: cfg.maxBody,
		Logger:       logger,
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
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return err
	}
	logger.Info("listening", "addr", ln.Addr().String(), "db", cfg.dbPath)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down", "timeout", cfg.shutdownTimeout)
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
