// Command mkconfusables writes model's table of Unicode confusables
// (UTS #39's confusables.txt) and of the code points its skeleton drops
// (Default_Ignorable_Code_Point, from the UCD's DerivedCoreProperties.txt),
// both of one Unicode version. Each file's SHA-256 is checked against the
// one pinned below, so the table is made from exactly the data it names.
//
// By default it downloads both files from unicode.org; -confusables and
// -properties read local copies instead (the same bytes, checked the same
// way). Raising the version means new URLs and new hashes here, and a look
// at what the new data moved: an account's stored skeleton is computed
// with the table of the release that stored it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The data the table is made from.
const (
	unicodeVersion    = "17.0.0"
	confusablesURL    = "https://www.unicode.org/Public/security/17.0.0/confusables.txt"
	confusablesSHA256 = "091c7f82fc39ef208faf8f94d29c244de99254675e09de163160c810d13ef22a"
	propertiesURL     = "https://www.unicode.org/Public/17.0.0/ucd/DerivedCoreProperties.txt"
	propertiesSHA256  = "24c7fed1195c482faaefd5c1e7eb821c5ee1fb6de07ecdbaa64b56a99da22c08"
)

func main() {
	confusables := flag.String("confusables", "", "read confusables.txt from this `file` instead of downloading it")
	properties := flag.String("properties", "", "read DerivedCoreProperties.txt from this `file` instead of downloading it")
	out := flag.String("o", "confusables_table.go", "write the table to this `file`")
	flag.Parse()
	if err := run(*confusables, *properties, *out); err != nil {
		fmt.Fprintln(os.Stderr, "mkconfusables:", err)
		os.Exit(1)
	}
}

func run(confusablesFile, propertiesFile, out string) error {
	conf, err := load(confusablesFile, confusablesURL, confusablesSHA256)
	if err != nil {
		return err
	}
	props, err := load(propertiesFile, propertiesURL, propertiesSHA256)
	if err != nil {
		return err
	}
	mappings, err := parseConfusables(conf)
	if err != nil {
		return fmt.Errorf("confusables.txt: %w", err)
	}
	ignorable, err := parseProperty(props, "Default_Ignorable_Code_Point")
	if err != nil {
		return fmt.Errorf("DerivedCoreProperties.txt: %w", err)
	}
	src, err := table(mappings, ignorable)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

// load reads file, or downloads url when file is empty, and checks that
// the bytes are the pinned ones.
func load(file, url, want string) ([]byte, error) {
	var b []byte
	var err error
	if file != "" {
		b, err = os.ReadFile(file)
	} else {
		b, err = download(url)
	}
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != want {
		return nil, fmt.Errorf("%s: SHA-256 is %s, want %s (Unicode %s's file)", url, got, want, unicodeVersion)
	}
	return b, nil
}

func download(url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 16<<20))
}

// mapping is one line of confusables.txt: a source code point and its
// prototype.
type mapping struct {
	from rune
	to   string
}

// parseConfusables reads the lines "source ; target ; MA # comment",
// where source is one code point and target one or more, in hex.
func parseConfusables(b []byte) ([]mapping, error) {
	var ms []mapping
	seen := make(map[rune]bool)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimPrefix(line, "\ufeff")
		if strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Split(line, ";")
		if len(fields) != 3 {
			return nil, fmt.Errorf("line %d: %d fields, want 3", n, len(fields))
		}
		if t := strings.TrimSpace(fields[2]); t != "MA" {
			return nil, fmt.Errorf("line %d: type %q, want MA", n, t)
		}
		from, err := codePoints(fields[0])
		if err != nil || len(from) != 1 {
			return nil, fmt.Errorf("line %d: source %q is not one code point", n, strings.TrimSpace(fields[0]))
		}
		to, err := codePoints(fields[1])
		if err != nil || len(to) == 0 {
			return nil, fmt.Errorf("line %d: target %q: not code points", n, strings.TrimSpace(fields[1]))
		}
		if seen[from[0]] {
			return nil, fmt.Errorf("line %d: U+%04X mapped twice", n, from[0])
		}
		seen[from[0]] = true
		ms = append(ms, mapping{from[0], string(to)})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, errors.New("no mappings")
	}
	slices.SortFunc(ms, func(a, b mapping) int { return int(a.from - b.from) })
	return ms, nil
}

// codePoints reads space-separated hex code points.
func codePoints(s string) ([]rune, error) {
	var rs []rune
	for _, f := range strings.Fields(s) {
		v, err := strconv.ParseUint(f, 16, 32)
		if err != nil || v > 0x10FFFF {
			return nil, fmt.Errorf("bad code point %q", f)
		}
		rs = append(rs, rune(v))
	}
	return rs, nil
}

// span is an inclusive range of code points.
type span struct{ lo, hi rune }

// parseProperty reads the ranges "0000..0000 ; Name # comment" (or a
// single code point) of the property name, merged where they touch.
func parseProperty(b []byte, name string) ([]span, error) {
	var spans []span
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		cps, prop, ok := strings.Cut(line, ";")
		if !ok || strings.TrimSpace(prop) != name {
			continue
		}
		lo, hi, isRange := strings.Cut(strings.TrimSpace(cps), "..")
		if !isRange {
			hi = lo
		}
		l, err1 := codePoints(lo)
		h, err2 := codePoints(hi)
		if err1 != nil || err2 != nil || len(l) != 1 || len(h) != 1 || l[0] > h[0] {
			return nil, fmt.Errorf("line %d: bad range %q", n, strings.TrimSpace(cps))
		}
		spans = append(spans, span{l[0], h[0]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("no code point has %s", name)
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.lo - b.lo) })
	merged := spans[:1]
	for _, s := range spans[1:] {
		last := &merged[len(merged)-1]
		if s.lo <= last.hi+1 {
			last.hi = max(last.hi, s.hi)
			continue
		}
		merged = append(merged, s)
	}
	return merged, nil
}

// table is the Go source of the generated file.
func table(ms []mapping, ignorable []span) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `// Code generated by model/internal/mkconfusables; DO NOT EDIT.

// From Unicode %[1]s: confusables.txt (UTS #39, SHA-256 %[2]s)
// and DerivedCoreProperties.txt (SHA-256 %[3]s).

package model

import "unicode"

`, unicodeVersion, confusablesSHA256, propertiesSHA256)
	b.WriteString("// confusables are confusables.txt's mappings, by source code point.\n")
	b.WriteString("var confusables = [...]confusable{\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "\t{0x%04X, %+q},\n", m.from, m.to)
	}
	b.WriteString("}\n\n")
	b.WriteString("// defaultIgnorable is Default_Ignorable_Code_Point, which a skeleton drops.\n")
	b.WriteString("var defaultIgnorable = &unicode.RangeTable{\n")
	var r16, r32 []span
	for _, s := range ignorable {
		switch {
		case s.hi <= 0xFFFF:
			r16 = append(r16, s)
		case s.lo > 0xFFFF:
			r32 = append(r32, s)
		default:
			r16 = append(r16, span{s.lo, 0xFFFF})
			r32 = append(r32, span{0x10000, s.hi})
		}
	}
	latin := 0
	for _, s := range r16 {
		if s.hi <= unicode.MaxLatin1 {
			latin++
		}
	}
	if len(r16) > 0 {
		b.WriteString("\tR16: []unicode.Range16{\n")
		for _, s := range r16 {
			fmt.Fprintf(&b, "\t\t{Lo: 0x%04X, Hi: 0x%04X, Stride: 1},\n", s.lo, s.hi)
		}
		b.WriteString("\t},\n")
	}
	if len(r32) > 0 {
		b.WriteString("\tR32: []unicode.Range32{\n")
		for _, s := range r32 {
			fmt.Fprintf(&b, "\t\t{Lo: 0x%05X, Hi: 0x%05X, Stride: 1},\n", s.lo, s.hi)
		}
		b.WriteString("\t},\n")
	}
	fmt.Fprintf(&b, "\tLatinOffset: %d,\n}\n", latin)
	return format.Source(b.Bytes())
}
