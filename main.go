// Command herald is a small messaging service with user accounts, in one
// executable with an embedded database.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
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
	logger, logOut := newLogger(cfg.logFormat, stderr)
	err = serve(ctx, cfg, getenv, logger)
	_ = logOut.Close() // stderr failing leaves nowhere to say so
	if err != nil {
		// One line an operator can act on, whatever the log format.
		fmt.Fprintln(stderr, "herald:", plainError(err))
		return 1
	}
	return 0
}
