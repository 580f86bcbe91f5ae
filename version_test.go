package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
)

func TestDescribeBuild(t *testing.T) {
	vcs := func(modified string, more ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Settings: append([]debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-11-25T12:00:00Z"},
			{Key: "vcs.modified", Value: modified},
		}, more...)}
	}
	tests := []struct {
		name   string
		linked string
		bi     *debug.BuildInfo
		goarch string
		want   string
	}{
		{"release", "0.7.0", vcs("false"), "amd64", "herald 0.7.0 (0123456789ab, go1.26.8, linux/amd64)"},
		{"release from a changed tree", "0.7.0", vcs("true"), "amd64", "herald 0.7.0 (0123456789ab-dirty, go1.26.8, linux/amd64)"},
		{"devel", "", vcs("false"), "amd64", "herald devel (0123456789ab, go1.26.8, linux/amd64)"},
		{"devel with changes", "", vcs("true"), "arm64", "herald devel (0123456789ab-dirty, go1.26.8, linux/arm64)"},
		{"no VCS information", "", &debug.BuildInfo{GoVersion: "go1.26.8"}, "amd64", "herald devel (unknown, go1.26.8, linux/amd64)"},
		{"no build information", "", nil, "amd64", "herald devel (unknown, " + runtime.Version() + ", linux/amd64)"},
		{"ARMv6", "0.7.0", vcs("false", debug.BuildSetting{Key: "GOARM", Value: "6"}), "arm", "herald 0.7.0 (0123456789ab, go1.26.8, linux/armv6)"},
		{"ARMv7 with a float mode", "0.7.0", vcs("false", debug.BuildSetting{Key: "GOARM", Value: "7,softfloat"}), "arm", "herald 0.7.0 (0123456789ab, go1.26.8, linux/armv7)"},
		{"a short revision", "", &debug.BuildInfo{GoVersion: "go1.26.8", Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}}}, "amd64", "herald devel (abc, go1.26.8, linux/amd64)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := describeBuild(tt.linked, tt.bi, "linux", tt.goarch).String(), tt.want; got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestRunVersion(t *testing.T) {
	for _, arg := range []string{"version", "--version", "-version", "-v"} {
		t.Run(arg, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), []string{arg}, environ(nil), strings.NewReader(""), &stdout, &stderr)
			if got, want := code, 0; got != want {
				t.Errorf("run(%s) = %d, want %d", arg, got, want)
			}
			if got, want := stdout.String(), currentBuild().String()+"\n"; got != want {
				t.Errorf("stdout = %q, want %q", got, want)
			}
			if got := stderr.String(); got != "" {
				t.Errorf("stderr = %q, want empty", got)
			}
		})
	}
	t.Run("help", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if got, want := run(context.Background(), []string{"version", "--help"}, environ(nil), strings.NewReader(""), &stdout, &stderr), 0; got != want {
			t.Errorf("exit status %d, want %d", got, want)
		}
		if !strings.Contains(stdout.String(), "Usage: herald version") {
			t.Errorf("stdout lacks the usage:\n%s", stdout.String())
		}
	})
	t.Run("an argument", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if got, want := run(context.Background(), []string{"version", "--db", "x"}, environ(nil), strings.NewReader(""), &stdout, &stderr), 2; got != want {
			t.Errorf("exit status %d, want %d", got, want)
		}
		if got, want := stderr.String(), "herald version: takes no arguments, got \"--db\"; see herald version --help\n"; got != want {
			t.Errorf("stderr = %q, want %q", got, want)
		}
	})
	t.Run("serve's help names it", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		run(context.Background(), []string{"--help"}, environ(nil), strings.NewReader(""), &stdout, &stderr)
		for _, want := range []string{"herald version", "--version"} {
			if !strings.Contains(stdout.String(), want) {
				t.Errorf("--help lacks %q:\n%s", want, stdout.String())
			}
		}
	})
}

// versionLineRE is the shape of herald version's line: version, commit
// (12 hex digits, perhaps -dirty, or unknown), Go version, os/arch.
var versionLineRE = regexp.MustCompile(`^herald (\S+) \(([0-9a-f]{12}(?:-dirty)?|unknown), (go1\.\S+), (\w+/\w+)\)\n$`)

// TestVersionBinary builds the real binary as a developer would and as the
// release build does (the version linked in), and runs herald version on
// both: the value the linker sets must reach the line, and a build without
// it must say devel.
func TestVersionBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice")
	}
	// go test puts its own go first on the PATH.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build with")
	}
	dir := t.TempDir()
	// Where Go can stamp the commit (a git clone), the devel line must name
	// the one checked out. -buildvcs=auto undoes a GOFLAGS=-buildvcs=false
	// in the environment; in a git worktree, whose .git is a file, Go
	// stamps nothing and the commit is unknown.
	head := ""
	if fi, err := os.Stat(".git"); err == nil && fi.IsDir() {
		if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
			head = strings.TrimSpace(string(out))
		}
	}
	for _, tt := range []struct {
		name, ldflags, wantVersion string
	}{
		{"devel", "", "devel"},
		{"release", "-X main.version=v9.9.9", "v9.9.9"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			bin := filepath.Join(dir, "herald-"+tt.name)
			build := exec.Command(goTool, "build", "-buildvcs=auto", "-ldflags="+tt.ldflags, "-o", bin, ".")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			for _, arg := range []string{"version", "--version"} {
				out, err := exec.Command(bin, arg).Output()
				if err != nil {
					t.Fatalf("herald %s: %v", arg, err)
				}
				m := versionLineRE.FindStringSubmatch(string(out))
				if m == nil {
					t.Fatalf("herald %s printed %q, which is not a version line", arg, out)
				}
				if got, want := m[1], tt.wantVersion; got != want {
					t.Errorf("herald %s: version %q, want %q", arg, got, want)
				}
				if got, want := m[3], runtime.Version(); got != want {
					t.Errorf("herald %s: Go version %q, want %q", arg, got, want)
				}
				if got, want := m[4], runtime.GOOS+"/"+runtime.GOARCH; got != want {
					t.Errorf("herald %s: platform %q, want %q", arg, got, want)
				}
				if commit, _, _ := strings.Cut(m[2], "-"); head != "" && !strings.HasPrefix(head, commit) {
					t.Errorf("herald %s: commit %q, want the checked-out %s", arg, m[2], head)
				}
			}
		})
	}
}

// TestBuildInfoMetric: /metrics names the running binary's version, and
// the listening line does too.
func TestBuildInfoMetric(t *testing.T) {
	in := startListening(t, []string{"--addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "herald.db")}, nil)
	defer in.stop(t)
	m := metricsRE.FindStringSubmatch(in.stderr.String())
	if m == nil {
		t.Fatalf("no metrics listening line:\n%s", in.stderr)
	}
	b := currentBuild()
	if want := "version=" + b.Version + " commit=" + b.Commit; !strings.Contains(in.stderr.String(), want) {
		t.Errorf("the log lacks %q:\n%s", want, in.stderr)
	}
	res, err := newClient(t).Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	want := `herald_build_info{version="` + b.Version + `",commit="` + b.Commit + `",goversion="` + b.GoVersion + `"} 1` + "\n"
	if !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %q:\n%s", want, body)
	}
}

// TestBuildInfoLabels: a version with a quote, a backslash or a newline in
// it is escaped, not a panic or a broken exposition.
func TestBuildInfoLabels(t *testing.T) {
	set := metrics.NewSet()
	registerBuildInfo(set, buildInfo{Version: "1.0 \"odd\" \\ build\nline", Commit: "unknown", GoVersion: "go1.26.8"})
	var out bytes.Buffer
	set.WritePrometheus(&out)
	if got, want := out.String(), `herald_build_info{version="1.0 \"odd\" \\ build\nline",commit="unknown",goversion="go1.26.8"} 1`+"\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
