package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/VictoriaMetrics/metrics"
)

// version is the release a binary was built as, set by the release build
// with -ldflags "-X main.version=..." and empty in every other build. It is
// package state only because the linker can set nothing else; it is
// constant from the moment the program starts.
var version string

// buildInfo says which Herald is running: what an operator needs to tell
// whether a fix is in it and whether it is the file that was released.
type buildInfo struct {
	Version   string // the release, or "devel" for any other build
	Commit    string // 12 hex digits, "-dirty" when the tree had changes; "unknown" without VCS information
	GoVersion string
	OS        string
	Arch      string // with the ARM version the binary needs: armv6, armv7
}

// String is the line herald version prints.
func (b buildInfo) String() string {
	return fmt.Sprintf("herald %s (%s, %s, %s/%s)", b.Version, b.Commit, b.GoVersion, b.OS, b.Arch)
}

// currentBuild describes the running binary.
func currentBuild() buildInfo {
	bi, _ := debug.ReadBuildInfo() // nil when the binary carries none
	return describeBuild(version, bi, runtime.GOOS, runtime.GOARCH)
}

// describeBuild is currentBuild over its inputs, so that release, devel
// and bare builds can each be tested. The commit comes from the build
// information Go records (go build inside a git clone, GoReleaser's builds
// too), not from the linker, so a development build names its commit
// without any flags.
func describeBuild(linked string, bi *debug.BuildInfo, goos, goarch string) buildInfo {
	b := buildInfo{Version: linked, Commit: "unknown", GoVersion: runtime.Version(), OS: goos, Arch: goarch}
	if b.Version == "" {
		b.Version = "devel"
	}
	if bi == nil {
		return b
	}
	if bi.GoVersion != "" {
		b.GoVersion = bi.GoVersion
	}
	var revision, modified, goarm string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		case "GOARM":
			goarm = s.Value
		}
	}
	if revision != "" {
		b.Commit = revision[:min(len(revision), 12)]
		if modified == "true" {
			b.Commit += "-dirty"
		}
	}
	if goarch == "arm" && goarm != "" {
		// GOARM may carry the floating-point mode too: "7,softfloat".
		level, _, _ := strings.Cut(goarm, ",")
		b.Arch += "v" + level
	}
	return b
}

// isVersionCommand says whether a first argument asks for the version:
// the subcommand, or the flags people try first.
func isVersionCommand(arg string) bool {
	switch arg {
	case "version", "--version", "-version", "-v":
		return true
	}
	return false
}

// runVersion prints the version line; its exit status is 2 for anything
// after it but --help.
func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-help" || args[0] == "-h") {
		fmt.Fprint(stdout, "Usage: herald version (or herald --version, herald -v)\n\nPrints the release this binary is, or devel for any other build, then the\ncommit it was built from (-dirty: with uncommitted changes), the Go version\nthat built it and the system it runs on.\n")
		return 0
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "herald version: takes no arguments, got %q; see herald version --help\n", args[0])
		return 2
	}
	fmt.Fprintln(stdout, currentBuild())
	return 0
}

// registerBuildInfo adds herald_build_info, the constant 1 labelled with
// the build, so a dashboard can show which version each server runs and
// when it changed.
func registerBuildInfo(set *metrics.Set, b buildInfo) {
	name := fmt.Sprintf(`herald_build_info{version="%s",commit="%s",goversion="%s"}`,
		labelValue(b.Version), labelValue(b.Commit), labelValue(b.GoVersion))
	set.NewGauge(name, func() float64 { return 1 })
}

// labelValue escapes a label value as Prometheus's text format wants it.
// The version is whatever the release build linked in, so a quote or a
// backslash in it must not end the value early (the metrics package would
// panic on the name).
func labelValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
