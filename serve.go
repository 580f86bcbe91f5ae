package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"herald/auth"
	"herald/chores"
	heraldhttp "herald/http"
	"herald/http/connlimit"
	"herald/http/netquirk"
	"herald/http/stream"
	"herald/push"
)

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
	// spends CPU to stay far below memory already granted: a read-heavy
	// server's live heap is small, so it collected several times a
	// second. Letting the heap grow fourfold between collections spends
	// that CPU on requests instead (docs/performance.md, "HTTP: where a
	// request's time goes"); the limit still caps the heap. GOGC, when the
	// operator sets it, is left alone.
	if getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
}

// setProcs gives the Go scheduler more slots (Ps) than there are CPUs and
// returns the CPUs it found. With one P per CPU a goroutine that becomes
// runnable — a request whose bytes arrived, the group committer back from
// fsync — waits in Go's run queue until a running goroutine yields, and
// under load that wait (runtime/metrics /sched/latencies) was most of a
// read's tail latency. With twice the Ps the kernel, which preempts at a
// finer grain, shares the CPUs between their threads: the waits shrink,
// and the tail latencies with them, at the same throughput
// (docs/performance.md, "The scheduler: twice the slots"). GOMAXPROCS,
// when the operator sets it, is left alone.
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
	httpLn, err := listenPlainHTTP(cfg)
	if err != nil {
		return err
	}
	if httpLn != nil {
		defer httpLn.Close()
	}
	// Certificate files are read before the database is opened, for the
	// same reason.
	tlsOn, err := setupTLS(cfg, portOf(ln), logger)
	if err != nil {
		return err
	}
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
		if closeErr := db.Close(); closeErr != nil {
			err = errors.Join(err, fmt.Errorf("closing database: %w", closeErr))
		}
		if err == nil {
			logger.Info("stopped cleanly")
		}
	}()

	// The chores: token uses written, the sweeps. They stop before the
	// database closes.
	choresCtx, stopChores := context.WithCancel(context.Background())
	choresDone := make(chan struct{})
	go func() {
		defer close(choresDone)
		chores.Run(choresCtx, db, choresFor(cfg), func(chore string, err error) {
			logger.Warn(chore, "err", err)
		})
	}()
	defer func() { stopChores(); <-choresDone }()

	// Web Push, when on: it stops before the chores give the lead up and
	// the database closes.
	if cfg.pushContact != "" {
		stopPush, err := startPush(cfg, db, set, logger)
		if err != nil {
			return err
		}
		defer stopPush()
	}

	setMemoryLimit(cfg, getenv, logger)
	proxies := cfg.proxies()
	hashQueue := cfg.hashQueue
	if hashQueue == 0 {
		hashQueue = auth.DefaultWaitingPerSlot * cfg.hashConcurrency
	}
	hasher := auth.NewHasherQueue(auth.DefaultParams(), cfg.hashConcurrency, hashQueue)
	if set != nil {
		registerBuildInfo(set, currentBuild())
		set.NewGauge("herald_hash_computing", func() float64 { c, _ := hasher.Load(); return float64(c) })
		set.NewGauge("herald_hash_waiting", func() float64 { _, w := hasher.Load(); return float64(w) })
		storeGauges(set, db)
		msrv := serveMetrics(metricsLn, set, cfg.pprof)
		defer msrv.Close()
		logger.Info("metrics listening", "addr", metricsLn.Addr().String())
	}
	// E-mail stops after the server: a request still running may queue one.
	var mailer heraldhttp.Mailer
	sender, stopMail := startMail(&cfg.mailFlags, logger)
	defer stopMail()
	if sender != nil {
		mailer = sender
	}
	handler := heraldhttp.NewServer(db, hasher, heraldhttp.Config{
		Mailer:       mailer,
		Metrics:      set,
		TokenTTL:     cfg.tokenTTL,
		MaxBodyBytes: cfg.maxBody,
		Logger:       logger,
		Registration: cfg.registration,
		PublicURL:    cfg.publicURL,
		Version:      strings.TrimPrefix(currentBuild().String(), "herald "),
		Streams:      stream.Limits{PerUser: cfg.streamsPerUser, Total: cfg.streams},
		Push:         heraldhttp.PushConfig{Contact: cfg.pushContact, AllowPrivate: cfg.pushAllowPrivate},
		Limits: heraldhttp.Limits{
			LoginFailuresPerAccount: cfg.loginPerAccount,
			LoginFailuresPerAddress: cfg.loginPerAddress,
			RegistrationsPerAddress: cfg.registerPerAddr,
			WritesPerAccount:        cfg.writesPerAcct,
			TrustedProxies:          proxies,
		},
	})
	// The settings an administrator changed, which the flags give only
	// for a database that holds none, are in force before the first
	// request, and followed until the database closes.
	followCtx, stopFollowing := context.WithCancel(context.Background())
	followed, err := handler.FollowSettings(followCtx)
	if err != nil {
		stopFollowing()
		return fmt.Errorf("reading the settings from the database: %w", err)
	}
	defer func() { stopFollowing(); <-followed }()
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
	var tlsURL string
	if tlsOn != nil {
		tlsURL = tlsOn.url
	}
	logStartup(ctx, logger, cfg, db, ln.Addr(), tlsOn != nil, tlsURL, string(handler.Registration()))

	var onRefuse func()
	if set != nil {
		onRefuse = set.NewCounter("herald_connections_refused_total").Inc
	}
	// The trusted proxies' connections carry many clients' requests; the
	// limit is for clients that reach Herald themselves.
	limited := connlimit.Limit(srv, ln, connlimit.Options{
		PerAddress: cfg.connsPerAddr, Exempt: proxies, Logger: logger, OnRefuse: onRefuse})
	var served net.Listener
	if tlsOn != nil {
		var stopPlain func()
		served, stopPlain = tlsOn.start(ctx, srv, limited, httpLn, db, logger)
		defer stopPlain()
	} else {
		served = netquirk.CoalesceWrites(srv, limited)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(served) }()
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
	// What requests left running ends before the e-mail and the database
	// it uses stop (deferred above), however the shutdown goes.
	defer handler.StopBackground()
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

// startPush starts the push sender over db and returns what stops it. On
// a store several instances share, only the instance leading the chores
// sends (chores.Leader: the chores take the lead, the sender follows).
func startPush(cfg *config, db store, set *metrics.Set, logger *slog.Logger) (stop func(), err error) {
	pushStore, ok := db.(push.Store)
	if !ok {
		return nil, errors.New("this database cannot keep Web Push's subscriptions")
	}
	pcfg := push.Config{Contact: cfg.pushContact, PublicURL: strings.TrimSuffix(cfg.publicURL, "/"),
		AllowPrivate: cfg.pushAllowPrivate, Metrics: set, Logger: logger}
	if l, ok := db.(interface{ Leading() bool }); ok {
		pcfg.Leading = l.Leading
	}
	ctx, cancel := context.WithCancel(context.Background())
	sender, err := push.New(ctx, pushStore, pcfg)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("starting Web Push: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sender.Run(ctx)
	}()
	logger.Info("Web Push on", "contact", cfg.pushContact, "allow_private", cfg.pushAllowPrivate)
	return func() { cancel(); <-done }, nil
}
