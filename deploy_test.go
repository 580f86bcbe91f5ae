package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	yaml "github.com/oasdiff/yaml3"
)

// TestDeployFilesNameRealSettings: the compose files and the Debian
// package's defaults name only variables Herald reads: a misspelt one
// (HERALD_TRUSTED_PROXY) would be ignored without a word, and the service
// would run without the setting its operator meant. The compose files
// parse, every service Herald runs in has an image and its database, and
// what they mount is there.
func TestDeployFilesNameRealSettings(t *testing.T) {
	var help, errOut syncBuffer
	if code := run(context.Background(), []string{"--help"}, environ(nil), strings.NewReader(""), &help, &errOut); code != 0 {
		t.Fatalf("--help = %d, %s", code, errOut.String())
	}
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`env (HERALD_[A-Z_]+)\)`).FindAllStringSubmatch(help.String(), -1) {
		known[m[1]] = true
	}
	if len(known) < 20 {
		t.Fatalf("found %d variables in --help", len(known))
	}
	check := func(file, name string) {
		t.Helper()
		if strings.HasPrefix(name, "HERALD_") && !known[name] {
			t.Errorf("%s sets %s, which no flag reads (see herald --help)", file, name)
		}
	}

	composes, err := filepath.Glob(filepath.Join("deploy", "compose*.yaml"))
	if err != nil || len(composes) < 2 {
		t.Fatalf("compose files: %v, %v", composes, err)
	}
	for _, file := range composes {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Services map[string]struct {
				Image       string            `yaml:"image"`
				Environment map[string]string `yaml:"environment"`
				Volumes     []string          `yaml:"volumes"`
			} `yaml:"services"`
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			t.Errorf("%s does not parse: %v", file, err)
			continue
		}
		heralds := 0
		for name, svc := range doc.Services {
			if svc.Image == "" {
				t.Errorf("%s: service %s has no image", file, name)
			}
			for k := range svc.Environment {
				check(file, k)
			}
			for _, v := range svc.Volumes {
				if src, _, _ := strings.Cut(v, ":"); strings.HasPrefix(src, "./") {
					if _, err := os.Stat(filepath.Join("deploy", src)); err != nil {
						t.Errorf("%s: service %s mounts %s, which is not there", file, name, src)
					}
				}
			}
			if strings.Contains(svc.Image, "HERALD_IMAGE") {
				heralds++
				if _, onPostgres := svc.Environment["HERALD_DB"]; !onPostgres && !strings.Contains(strings.Join(svc.Volumes, " "), ":/data") {
					t.Errorf("%s: service %s keeps its bbolt file nowhere that outlives it", file, name)
				}
			}
		}
		if heralds == 0 {
			t.Errorf("%s runs no Herald", file)
		}
	}

	defaults := filepath.Join("packaging", "herald.default")
	raw, err := os.ReadFile(defaults)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "#")
		if name, _, ok := strings.Cut(line, "="); ok && regexp.MustCompile(`^HERALD_[A-Z_]+$`).MatchString(name) {
			check(defaults, name)
		}
	}
}
