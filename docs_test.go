package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinksResolve: every relative link in README.md, docs/*.md and
// CHANGELOG.md names a file that exists, and a link with a #fragment
// names a heading of its Markdown file, by GitHub's rule for headings'
// anchors.
func TestDocsLinksResolve(t *testing.T) {
	scheme := regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	for _, page := range append(docsPages(t), "CHANGELOG.md") {
		for _, link := range markdownLinks(readDoc(t, page)) {
			if scheme.MatchString(link) {
				continue // http:, https:, mailto:
			}
			target, fragment, _ := strings.Cut(link, "#")
			path := page
			if target != "" {
				path = filepath.Join(filepath.Dir(page), target)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links to %s, which does not exist", page, link)
				continue
			}
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s links to %s: a fragment of a file that is not Markdown", page, link)
				continue
			}
			if anchors := headingAnchors(readDoc(t, path)); !anchors[fragment] {
				t.Errorf("%s links to %s, but %s has no heading whose anchor is #%s", page, link, path, fragment)
			}
		}
	}
}

// TestDocsPagesLinkedBothWays: the README links to every page of docs/,
// and every page links back to the README, so a reader can go from the
// front door to any page and home again.
func TestDocsPagesLinkedBothWays(t *testing.T) {
	fromREADME := make(map[string]bool)
	for _, link := range markdownLinks(readDoc(t, "README.md")) {
		target, _, _ := strings.Cut(link, "#")
		fromREADME[filepath.Clean(target)] = true
	}
	for _, page := range docsPages(t) {
		if page == "README.md" {
			continue
		}
		if !fromREADME[page] {
			t.Errorf("README.md does not link to %s", page)
		}
		back := false
		for _, link := range markdownLinks(readDoc(t, page)) {
			target, _, _ := strings.Cut(link, "#")
			back = back || filepath.Join(filepath.Dir(page), target) == "README.md"
		}
		if !back {
			t.Errorf("%s does not link back to the README", page)
		}
	}
}

// TestREADMEAtMost250Lines: the README is the front door; what a new
// capability needs said goes to a page of docs/, which the README links.
func TestREADMEAtMost250Lines(t *testing.T) {
	if n := strings.Count(readDoc(t, "README.md"), "\n"); n > 250 {
		t.Errorf("README.md has %d lines, want at most 250: move the detail to a page of docs/", n)
	}
}

// docsPages returns README.md and every Markdown page of docs/.
func docsPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no pages in docs/")
	}
	return append([]string{"README.md"}, pages...)
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// markdownLinks returns the targets of the inline links and images of a
// Markdown text, leaving out what is code: fenced blocks and code spans.
func markdownLinks(text string) []string {
	text = regexp.MustCompile("`[^`]*`").ReplaceAllString(withoutFences(text), "")
	var links []string
	for _, m := range regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`).FindAllStringSubmatch(text, -1) {
		links = append(links, m[1])
	}
	return links
}

// withoutFences returns text with its fenced code blocks blanked out.
func withoutFences(text string) string {
	var out strings.Builder
	fenced := false
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fenced = !fenced
			out.WriteString("\n")
			continue
		}
		if fenced {
			out.WriteString("\n")
			continue
		}
		out.WriteString(line)
	}
	return out.String()
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: the heading's text, as rendered, in lower case, without
// punctuation, spaces turned into hyphens; a repeated one gets -1, -2...
func headingAnchors(text string) map[string]bool {
	anchors := make(map[string]bool)
	seen := make(map[string]int)
	heading := regexp.MustCompile(`^#{1,6}[ \t]+(.*?)[ \t]*#*[ \t]*$`)
	link := regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	for line := range strings.Lines(withoutFences(text)) {
		m := heading.FindStringSubmatch(strings.TrimRight(line, "\n"))
		if m == nil {
			continue
		}
		rendered := strings.NewReplacer("`", "", "*", "").Replace(link.ReplaceAllString(m[1], "$1"))
		var slug strings.Builder
		for _, r := range strings.ToLower(rendered) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
				slug.WriteRune(r)
			}
		}
		anchor := slug.String()
		if n := seen[anchor]; n > 0 {
			seen[anchor] = n + 1
			anchor = fmt.Sprintf("%s-%d", anchor, n)
		} else {
			seen[anchor] = 1
		}
		anchors[anchor] = true
	}
	return anchors
}

// TestInstallPromisesNoDownload: while no release is published, the
// README's and the install page's every mention of a download says
// "once published", and both give the ways to get Herald today: the
// release command that builds every archive and .deb, a cross-build for a
// Pi, go install.
func TestInstallPromisesNoDownload(t *testing.T) {
	if !strings.Contains(readDoc(t, "CHANGELOG.md"), "## 0.7.0 — unreleased") {
		t.Skip("0.7.0, the first release, is out: its downloads exist")
	}
	install := readDoc(t, "docs/install.md")
	honest := regexp.MustCompile(`(?i)once\s+published|once\s+releases\s+are\s+published|no\s+release\s+has\s+been\s+published\s+yet`)
	for _, page := range []struct{ path, text string }{{"README.md", readDoc(t, "README.md")}, {"docs/install.md", install}} {
		for _, para := range strings.Split(page.text, "\n\n") {
			if regexp.MustCompile(`(?i)\bdownload`).MatchString(para) && !honest.MatchString(para) {
				t.Errorf("%s promises a download without saying once published:\n%s", page.path, para)
			}
		}
		for _, want := range []string{"goreleaser release --snapshot --clean", "CGO_ENABLED=0 GOOS=linux GOARCH=arm", "go install ."} {
			if !strings.Contains(page.text, want) {
				t.Errorf("%s does not give %q", page.path, want)
			}
		}
	}
	if !strings.Contains(install, "No release has been published yet") {
		t.Error("docs/install.md does not say that no release is published yet")
	}
}
