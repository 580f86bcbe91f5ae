// Package pgtest starts a throwaway PostgreSQL cluster for tests: Debian's
// (or any) PostgreSQL binaries, a data directory in a temporary directory,
// no TCP, a Unix socket beside the data, and a fresh database for each test
// that asks. The cluster is a child process of the test binary and dies
// with it.
//
// A test package starts one cluster in TestMain and stops it after the run:
//
//	func TestMain(m *testing.M) {
//		cluster := pgtest.Start()
//		code := m.Run()
//		cluster.Stop()
//		os.Exit(code)
//	}
//
// When PostgreSQL is not installed, tests that need it skip with a message
// saying so, unless HERALD_REQUIRE_POSTGRES=1, which makes them fail: CI
// installs PostgreSQL and must never pass by skipping.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// RequireEnv names the variable that turns a missing PostgreSQL from a
// skip into a failure.
const RequireEnv = "HERALD_REQUIRE_POSTGRES"

// Cluster is a running throwaway PostgreSQL server, or the reason there is
// none. Its methods are safe for concurrent use.
type Cluster struct {
	err     error // why there is no server; nil when it runs
	dir     string
	socket  string
	cmd     *exec.Cmd
	exited  chan struct{}
	log     *os.File
	next    atomic.Int64
	tmplMu  sync.Mutex
	tmpl    map[string]string // template databases made by Template, by name
	stopped sync.Once
}

// startTimeout bounds initdb plus the server's start.
const startTimeout = 60 * time.Second

// Start initialises and starts a cluster. It never fails: a cluster that
// could not start carries its error, which Database reports (a skip or a
// failure, see RequireEnv).
func Start() *Cluster {
	c := &Cluster{exited: make(chan struct{}), tmpl: make(map[string]string)}
	c.err = c.start()
	if c.err != nil {
		c.cleanUp()
	}
	return c
}

// ErrNotInstalled: no PostgreSQL server binaries were found.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (no initdb and postgres in PATH or /usr/lib/postgresql/*/bin; on Debian: apt-get install postgresql)")

// binDir finds the directory holding initdb and postgres: PATH first, then
// Debian's versioned directories, newest first.
func binDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	return "", ErrNotInstalled
}

// asServerUser makes cmd run as the postgres account when the test runs as
// root: initdb and postgres refuse to run as root. The files it writes must
// then belong to that account.
func asServerUser(cmd *exec.Cmd) (uid, gid int, err error) {
	if os.Geteuid() != 0 {
		return os.Getuid(), os.Getgid(), nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return 0, 0, fmt.Errorf("running as root, and there is no postgres account to run PostgreSQL as: %w", err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return uid, gid, nil
}

func (c *Cluster) start() error {
	bin, err := binDir()
	if err != nil {
		return err
	}
	// A short path of its own, readable by the server's account: socket
	// paths are limited to about 100 bytes, and t.TempDir's directories
	// are private to the user running the tests.
	c.dir, err = os.MkdirTemp("", "herald-pg-")
	if err != nil {
		return err
	}
	if err := os.Chmod(c.dir, 0o755); err != nil {
		return err
	}
	data := filepath.Join(c.dir, "data")
	c.socket = c.dir
	probe := exec.Command(filepath.Join(bin, "initdb"))
	uid, gid, err := asServerUser(probe)
	if err != nil {
		return err
	}
	if err := os.Chown(c.dir, uid, gid); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	// --no-sync: a throwaway cluster need not reach the disk.
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync")
	if _, _, err := asServerUser(initdb); err != nil {
		return err
	}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	c.log, err = os.Create(filepath.Join(c.dir, "server.log"))
	if err != nil {
		return err
	}
	// No TCP, a socket in our own directory; fsync off because nothing
	// here must survive a crash of the machine; enough connections for
	// tests that run several Herald stores side by side.
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data,
		"-c", "listen_addresses=", "-c", "unix_socket_directories="+c.socket,
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=300",
		"-c", "shared_buffers=64MB", "-c", "wal_level=minimal", "-c", "max_wal_senders=0", "-c", "log_min_messages=warning")
	if _, _, err := asServerUser(c.cmd); err != nil {
		return err
	}
	// The server dies with the test binary, however that ends.
	c.cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	if err := c.cmd.Start(); err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	go func() { _ = c.cmd.Wait(); close(c.exited) }()
	for {
		conn, err := pgx.Connect(ctx, c.url("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case <-c.exited:
			out, _ := os.ReadFile(c.log.Name())
			return fmt.Errorf("postgres exited at start:\n%s", out)
		case <-ctx.Done():
			return fmt.Errorf("postgres did not accept connections within %v: %v", startTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// url is the connection URL of database name on the cluster's socket.
func (c *Cluster) url(name string) string {
	return "postgres:///" + name + "?host=" + c.socket + "&user=postgres&sslmode=disable"
}

// Stop shuts the server down (fast shutdown: connections are cut) and
// removes its files. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopped.Do(func() {
		if c.cmd != nil && c.cmd.Process != nil {
			_ = c.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-c.exited:
			case <-time.After(30 * time.Second):
				_ = c.cmd.Process.Kill()
				<-c.exited
			}
		}
		c.cleanUp()
	})
}

func (c *Cluster) cleanUp() {
	if c.log != nil {
		_ = c.log.Close()
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// Available reports why the cluster cannot serve, or nil.
func (c *Cluster) Available() error { return c.err }

// Require skips tb, or fails it under HERALD_REQUIRE_POSTGRES=1, when the
// cluster is not running.
func (c *Cluster) Require(tb testing.TB) {
	tb.Helper()
	if c == nil {
		tb.Fatal("pgtest: no cluster was started (TestMain must call pgtest.Start)")
	}
	if c.err == nil {
		return
	}
	if os.Getenv(RequireEnv) == "1" {
		tb.Fatalf("PostgreSQL is required (%s=1) but cannot run: %v", RequireEnv, c.err)
	}
	tb.Skipf("skipping: no PostgreSQL to test against: %v", c.err)
}

// Database creates a fresh, empty database for tb, dropped at its cleanup,
// and returns its URL.
func (c *Cluster) Database(tb testing.TB) string {
	tb.Helper()
	return c.database(tb, "template0")
}

// DatabaseFrom is Database copied from a template made by Template.
func (c *Cluster) DatabaseFrom(tb testing.TB, template string) string {
	tb.Helper()
	return c.database(tb, template)
}

func (c *Cluster) database(tb testing.TB, template string) string {
	tb.Helper()
	c.Require(tb)
	name := fmt.Sprintf("t%d_%d", os.Getpid(), c.next.Add(1))
	if err := c.exec(context.Background(), "CREATE DATABASE "+name+" TEMPLATE "+template); err != nil {
		tb.Fatalf("create database: %v", err)
	}
	tb.Cleanup(func() {
		// Herald's connections are closed by the test's own cleanups,
		// which ran first; FORCE ends whatever a failed test left open.
		if err := c.exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	return c.url(name)
}

// Template returns the name of a template database prepared once by
// prepare (given its URL), so that tests can copy it instead of preparing
// their own: creating Herald's schema in every test's database would cost
// more than the copy.
func (c *Cluster) Template(tb testing.TB, name string, prepare func(url string) error) string {
	tb.Helper()
	c.Require(tb)
	c.tmplMu.Lock()
	defer c.tmplMu.Unlock()
	if t, ok := c.tmpl[name]; ok {
		return t
	}
	t := "tmpl_" + name
	if err := c.exec(context.Background(), "CREATE DATABASE "+t+" TEMPLATE template0"); err != nil {
		tb.Fatalf("create template database: %v", err)
	}
	if err := prepare(c.url(t)); err != nil {
		tb.Fatalf("prepare template database %s: %v", t, err)
	}
	c.tmpl[name] = t
	return t
}

// URL returns the URL of an existing database of the cluster.
func (c *Cluster) URL(name string) string { return c.url(name) }

// exec runs one statement on the cluster's maintenance database.
func (c *Cluster) exec(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// Exec runs one statement on the database at url, for tests that reach
// past the store (to cut a connection, say).
func Exec(ctx context.Context, url, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// QueryInt runs a query returning one integer on the database at url.
func QueryInt(ctx context.Context, url, sql string, args ...any) (int64, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, sql, args...).Scan(&n)
	return n, err
}

// Name is the database name in a URL made by this package.
func Name(url string) string {
	rest := strings.TrimPrefix(url, "postgres:///")
	name, _, _ := strings.Cut(rest, "?")
	return name
}

// PID is the process ID of the cluster's server (the postmaster), for
// tests that signal it; 0 when the cluster does not run.
func (c *Cluster) PID() int {
	if c.err != nil || c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// Pause stops the whole server, the postmaster and every process it
// started, with SIGSTOP, as a machine that hangs or a process paused by
// a debugger looks from outside: connections stay open, and nothing
// answers on them; new connections are taken by the kernel and never
// greeted. resume sends SIGCONT to the same processes. Linux only (it
// finds the server's processes in /proc).
func (c *Cluster) Pause(tb testing.TB) (resume func()) {
	tb.Helper()
	c.Require(tb)
	pids := append(children(c.PID()), c.PID())
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			tb.Fatalf("stopping PostgreSQL process %d: %v", pid, err)
		}
	}
	var once sync.Once
	resume = func() {
		once.Do(func() {
			for _, pid := range pids {
				_ = syscall.Kill(pid, syscall.SIGCONT)
			}
		})
	}
	tb.Cleanup(resume)
	return resume
}

// children lists the processes whose parent is pid, from /proc.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// WaitReady waits until the server accepts connections again, after a
// backend was killed and the server restarted all of them (a crash
// restart: every connection is cut, and new ones are refused until the
// server has recovered).
func (c *Cluster) WaitReady(tb testing.TB) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, c.url("postgres"))
		if err == nil {
			_ = conn.Close(ctx)
			return
		}
		select {
		case <-c.exited:
			tb.Fatalf("PostgreSQL exited: %v", err)
		case <-ctx.Done():
			tb.Fatalf("PostgreSQL did not accept connections again within %v: %v", startTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
