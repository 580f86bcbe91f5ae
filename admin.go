package main

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"herald/auth"
	"herald/bolt"
	"herald/model"
	"herald/pg"
)

// herald admin grant|create|revoke --db FILE|URL EMAIL: administrators are
// made on the server's machine, and by no request. The acts go to the
// audit log as made on the server's machine.

const adminUsage = `Usage: herald admin grant  --db FILE|URL EMAIL   make an existing account an administrator
       herald admin create --db FILE|URL EMAIL   make a new account, an administrator; on a
                                                 terminal it asks for the password twice, unechoed;
                                                 otherwise it reads one line from standard input
       herald admin revoke --db FILE|URL EMAIL   take the role from an account

On a bbolt file the server must be stopped: the file is opened for writing, and
a running server's lock makes this fail at once. Run as root on a file in a
directory another user owns (the package's /var/lib/herald), it acts as that
user, so that the service can open the file afterwards. On PostgreSQL (a
postgres:// URL) the instances may keep running. Administrators may grant and
revoke the role of others through the API too; the last one cannot be revoked.

Flags:
  --db FILE|URL
    	database file or PostgreSQL URL (default: HERALD_DB, else herald.db)
`

// runAdmin runs herald admin: exit status 0 on success, 1 when the work
// failed, 2 for a usage error.
func runAdmin(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, adminUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	action := args[0]
	if action != "grant" && action != "create" && action != "revoke" {
		fmt.Fprintf(stderr, "herald admin: %q is not grant, create or revoke; see herald admin --help\n", action)
		return 2
	}
	fs := flag.NewFlagSet("herald admin "+action, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var db string
	fs.StringVar(&db, "db", "", "")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, adminUsage)
			return 0
		}
		fmt.Fprintf(stderr, "herald admin %s: %v; see herald admin --help\n", action, err)
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "herald admin %s: takes --db FILE|URL EMAIL; see herald admin --help\n", action)
		return 2
	}
	if db == "" {
		db = getenv("HERALD_DB")
	}
	if db == "" {
		db = "herald.db"
	}
	msg, err := adminAct(ctx, action, db, fs.Arg(0), stdin, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "herald admin %s: %s\n", action, plainError(err))
		return 1
	}
	fmt.Fprintln(stdout, msg)
	return 0
}

// adminAct does one act on the database at path and says what it did;
// prompts and notes go to notes.
func adminAct(ctx context.Context, action, path, email string, stdin io.Reader, notes io.Writer) (string, error) {
	email = model.NormalizeEmail(email)
	if action != "create" && !pg.IsURL(path) {
		// Only create may make a database; a typo in --db must not.
		if _, err := os.Stat(path); err != nil {
			return "", err
		}
	}
	var password string
	if action == "create" {
		reg := model.Registration{Email: email}
		var err error
		if reg.Password, err = readNewPassword(stdin, notes, email); err != nil {
			return "", err
		}
		reg.Normalize()
		if err := reg.Validate(); err != nil {
			return "", fmt.Errorf("%s", violationsText(err))
		}
		password = reg.Password
	}
	if !pg.IsURL(path) {
		if err := actAsDatabaseOwner(path, notes); err != nil {
			return "", err
		}
	}
	store, err := openAdminStore(ctx, path)
	if err != nil {
		return "", err
	}
	defer store.Close()
	switch action {
	case "create":
		hasher := auth.NewHasher(auth.DefaultParams(), 1)
		hash, err := hasher.Hash(ctx, password)
		if err != nil {
			return "", err
		}
		u := &model.User{Email: email, PasswordHash: hash}
		if err := store.CreateAdministrator(ctx, u); err != nil {
			if _, lookup := store.UserByEmail(ctx, email); errors.Is(err, model.ErrConflict) && lookup == nil {
				return "", fmt.Errorf("%s already has an account; make it an administrator with herald admin grant", email)
			}
			// Or the address looks like an account's: the store says so.
			return "", errors.New(violationsText(err))
		}
		return fmt.Sprintf("created %s, an administrator; log in with the password given", email), nil
	default:
		u, err := store.UserByEmail(ctx, email)
		if errors.Is(err, model.ErrNotFound) {
			return "", fmt.Errorf("no account has the e-mail %s (herald admin create makes one)", email)
		}
		if err != nil {
			return "", err
		}
		grant := action == "grant"
		if _, err := store.UpdateAccount(ctx, model.ByServer(), u.ID, model.AccountUpdate{Admin: &grant}); err != nil {
			return "", errors.New(clientText(err))
		}
		if grant {
			return fmt.Sprintf("%s is an administrator", u.Email), nil
		}
		return fmt.Sprintf("%s is no longer an administrator", u.Email), nil
	}
}

// readNewPassword reads the password of a new account: from a terminal,
// asked for twice without echoing it, so that it stays off the screen
// and out of the shell's history, and a typo is caught before it is
// stored; from anything else (a pipe, a file), one line, for scripts.
func readNewPassword(stdin io.Reader, prompt io.Writer, email string) (string, error) {
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fd := int(f.Fd())
		fmt.Fprintf(prompt, "Password for %s: ", email)
		first, err := term.ReadPassword(fd)
		fmt.Fprintln(prompt)
		if err != nil {
			return "", fmt.Errorf("reading the password from the terminal: %w", err)
		}
		fmt.Fprint(prompt, "The same password again: ")
		second, err := term.ReadPassword(fd)
		fmt.Fprintln(prompt)
		if err != nil {
			return "", fmt.Errorf("reading the password from the terminal: %w", err)
		}
		if subtle.ConstantTimeCompare(first, second) != 1 {
			return "", errors.New("the two passwords differ; nothing was changed")
		}
		return string(first), nil
	}
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("reading the password from standard input: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// adminStore is what herald admin needs of a store.
type adminStore interface {
	CreateAdministrator(ctx context.Context, u *model.User) error
	UserByEmail(ctx context.Context, email string) (*model.User, error)
	UpdateAccount(ctx context.Context, by model.Caller, id uint64, upd model.AccountUpdate) (*model.Account, error)
	Close() error
}

// openAdminStore opens the bbolt file or PostgreSQL database at path.
func openAdminStore(ctx context.Context, path string) (adminStore, error) {
	if pg.IsURL(path) {
		return pg.Open(ctx, path, pg.Options{PoolSize: 2})
	}
	// An older file is upgraded by a start of the server, which carries
	// over the administrators --admins named; an upgrade made here could
	// not.
	return bolt.Open(path, bolt.Options{KeepLayout: true})
}

// violationsText words a validation error for the command line.
func violationsText(err error) string {
	var v *model.ValidationError
	if !errors.As(err, &v) {
		return clientText(err)
	}
	var parts []string
	for _, vi := range v.Violations {
		parts = append(parts, vi.Field+" "+vi.Message)
	}
	return strings.Join(parts, "; ")
}

// clientText is the sentence a refusal carries, or the error's text.
func clientText(err error) string {
	var e *model.Error
	if errors.As(err, &e) && e.Detail != "" {
		return e.Detail
	}
	return err.Error()
}
