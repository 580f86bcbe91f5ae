package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"herald/bolt"
	"herald/pg"
)

// The offline subcommands: check, backup and compact, each on a database
// no server has open. Each has its own flags and --help; exit status 0 on
// success, 1 when the work failed or found problems, 2 for a usage error.

type tool struct {
	name, args, summary string
	positional          int // how many arguments follow the flags
	do                  func(db string, args []string, stdout io.Writer) error
}

var errProblemsFound = errors.New("problems found")

func tools() map[string]tool {
	return map[string]tool{
		"check":   {"check", "--db FILE", "Checks bbolt's page structure and every Herald invariant (each index entry points at its record and each record is indexed; e-mails unique; tokens point at users; sequences ahead of the highest ID), and lists every problem.", 0, runCheck},
		"backup":  {"backup", "--db FILE OUT", "Writes a consistent copy of the database to OUT (a new file). For a running server, an administrator downloads GET /api/admin/backup instead.", 1, runBackup},
		"compact": {"compact", "--db FILE OUT", "Writes a compacted copy of the database to OUT (a new file), leaving out the space deletions freed, and prints both sizes.", 1, runCompact},
	}
}

// runTool parses a subcommand's flags and runs it.
func runTool(t tool, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("herald "+t.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var db string
	fs.StringVar(&db, "db", "", "`path` of the database file (also HERALD_DB)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "Usage: herald %s %s\n\n%s\nThe server must be stopped: the database is opened read-only, and a running\nserver's lock makes this fail at once.\n\nFlags:\n  --db FILE\n    \tdatabase file (default: HERALD_DB, else herald.db)\n", t.name, t.args, t.summary)
			return 0
		}
		fmt.Fprintf(stderr, "herald %s: %v; see herald %s --help\n", t.name, err, t.name)
		return 2
	}
	if fs.NArg() != t.positional {
		fmt.Fprintf(stderr, "herald %s: takes %s; see herald %s --help\n", t.name, t.args, t.name)
		return 2
	}
	if db == "" {
		db = getenv("HERALD_DB")
	}
	if db == "" {
		db = "herald.db"
	}
	if pg.IsURL(db) {
		fmt.Fprintf(stderr, "herald %s: works on a bbolt file, and --db names a PostgreSQL database; use PostgreSQL's own tools there (pg_dump for a backup, pg_amcheck for a check, VACUUM FULL to compact)\n", t.name)
		return 1
	}
	if err := t.do(db, fs.Args(), stdout); err != nil {
		if !errors.Is(err, errProblemsFound) {
			fmt.Fprintf(stderr, "herald %s: %s\n", t.name, plainError(err))
		}
		return 1
	}
	return 0
}

func runCheck(path string, _ []string, stdout io.Writer) error {
	snap, err := bolt.OpenSnapshot(path)
	if err != nil {
		return err
	}
	defer snap.Close()
	problems, err := snap.Check()
	if err != nil {
		return err
	}
	c, err := snap.Counts()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d users, %d tokens, %d messages\n", path, c.Users, c.Tokens, c.Messages)
	if len(problems) == 0 {
		fmt.Fprintln(stdout, "no problems found")
		return nil
	}
	for _, p := range problems {
		fmt.Fprintln(stdout, "problem:", p)
	}
	fmt.Fprintf(stdout, "%d problems found\n", len(problems))
	return errProblemsFound
}

// runBackup writes to a temporary file beside OUT and renames it into
// place, so OUT is either absent or a complete copy.
func runBackup(path string, args []string, stdout io.Writer) error {
	out := args[0]
	if _, err := os.Stat(out); err == nil {
		return fmt.Errorf("%s already exists; backup writes a new file", out)
	}
	snap, err := bolt.OpenSnapshot(path)
	if err != nil {
		return err
	}
	defer snap.Close()
	tmp, err := os.CreateTemp(filepath.Dir(out), ".herald-backup-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	n, err := snap.WriteTo(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), out)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", out, err)
	}
	fmt.Fprintf(stdout, "backed up %s to %s (%d bytes)\n", path, out, n)
	return nil
}

func runCompact(path string, args []string, stdout io.Writer) error {
	out := args[0]
	before, err := os.Stat(path)
	if err != nil {
		return err
	}
	snap, err := bolt.OpenSnapshot(path)
	if err != nil {
		return err
	}
	defer snap.Close()
	if err := snap.Compact(out); err != nil {
		return err
	}
	after, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "compacted %s (%d bytes) into %s (%d bytes, %.0f%%)\n",
		path, before.Size(), out, after.Size(), 100*float64(after.Size())/float64(max(before.Size(), 1)))
	return nil
}
