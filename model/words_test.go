package model

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

func TestTerms(t *testing.T) {
	tests := []struct {
		q    string
		want []string
	}{
		{"", nil},
		{"   ", nil},
		{"...!?—", nil},
		{"\xff\xfe", nil},
		{"hello", []string{"hello"}},
		{"Hello World", []string{"hello", "world"}},
		{"hello hello HELLO Hello", []string{"hello"}},
		{"world hello world", []string{"world", "hello"}},
		{"  leading and trailing  ", []string{"leading", "and", "trailing"}},
		{"foo-bar_baz.qux", []string{"foo", "bar", "baz", "qux"}},
		{"ada@example.com", []string{"ada", "example", "com"}},
		{"x2 2x 42", []string{"x2", "2x", "42"}},
		{"Ünïcödé", []string{"ünïcödé"}},
		{"日本語、テキスト", []string{"日本語", "テキスト"}},
		{"ÑANDÚ", []string{"ñandú"}},
		{"hello\u00a0world\u3000again", []string{"hello", "world", "again"}},
		{"tab\tnew\nline", []string{"tab", "new", "line"}},
		{"bad\xffbyte", []string{"bad", "byte"}},
		{"٣ ١٢", []string{"٣", "١٢"}}, // Arabic-Indic digits are digits
		{"😀hello😀", []string{"hello"}},
	}
	for _, tt := range tests {
		if got := Terms(tt.q); !slices.Equal(got, tt.want) {
			t.Errorf("Terms(%q) = %q, want %q", tt.q, got, tt.want)
		}
	}
}

func TestContainsTerms(t *testing.T) {
	tests := []struct {
		content, q string
		want       bool
	}{
		{"anything", "", true},
		{"", "", true},
		{"", "hello", false},
		{"hello", "hello", true},
		{"Hello, World!", "hello world", true},
		{"Hello, World!", "world hello", true},
		{"helloworld", "hello", false},
		{"hello world", "helloworld", false},
		{"hellow", "hello", false},
		{"ohello", "hello", false},
		{"hello", "hell", false},
		{"say hello", "hello there", false},
		{"HELLO", "hello", true},
		{"ÜNÏCÖDÉ", "ünïcödé", true},
		{"ünïcödé", "ÜNÏCÖDÉ", true},
		{"unicode", "ünïcödé", false},
		{"私は 日本語、テキスト", "日本語", true},
		{"日本語テキスト", "日本語", false},
		{"foo-bar", "bar", true},
		// Combining marks belong to their word.
		{"cafe\u0301 au lait", "cafe", false},
		{"cafe\u0301 au lait", "CAFE\u0301", true},
		{"नमस्ते दुनिया", "नमस", false},
		{"नमस्ते दुनिया", "त", false},
		{"नमस्ते दुनिया", "नमस्ते", true},
		{"foo_bar", "foo", true},
		{"(hello)", "hello", true},
		{"\"hello\"", "hello", true},
		{"hello\u00a0world", "world", true},
		{"x2", "x", false},
		{"x 2", "x2", false},
		{"a\xffb", "a b", true},
		{"a\xffb", "ab", false},
		{"😀hello😀", "hello", true},
		{"hello hello", "hello", true},
		{"ΚΑΛΗΜΕΡΑ", "καλημερα", true},
		// NFC and NFD spellings are one word, in either direction.
		{"café au lait", "cafe\u0301", true},
		{"cafe\u0301 au lait", "CAFÉ", true},
		{"Ångström", "A\u030angstro\u0308m", true},
		{"café", "cafe", false},
		// Words too long for an index key still match exactly.
		{strings.Repeat("ab", 100) + " x", strings.Repeat("AB", 100), true},
		{strings.Repeat("ab", 100) + " x", strings.Repeat("ab", 99), false},
		{strings.Repeat("ab", 100) + "c", strings.Repeat("ab", 100) + "d", false},
	}
	for _, tt := range tests {
		if got := containsTerms([]byte(tt.content), Terms(tt.q)); got != tt.want {
			t.Errorf("containsTerms(%q, Terms(%q)) = %v, want %v", tt.content, tt.q, got, tt.want)
		}
		if got, want := containsTerms([]byte(tt.content), Terms(tt.q)), refContainsTerms(tt.content, tt.q); got != want {
			t.Errorf("containsTerms(%q, Terms(%q)) = %v, reference says %v", tt.content, tt.q, got, want)
		}
	}
}

// notWordRune is the reference definition of a separator: anything that is
// neither a Unicode letter nor a digit.
func notWordRune(r rune) bool {
	return !(unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r))
}

// refContainsTerms is the obvious implementation of the search rule: split
// both sides into words, lower-case them, and require every query word in the
// content's set.
func refContainsTerms(content, query string) bool {
	words := make(map[string]bool)
	for _, w := range strings.FieldsFunc(content, notWordRune) {
		words[refTerm(w)] = true
	}
	for _, w := range strings.FieldsFunc(query, notWordRune) {
		if !words[refTerm(w)] {
			return false
		}
	}
	return true
}

// refTerm is the reference form a word is compared in: composed (NFC),
// folded, and composed again, since folding can undo a composition.
func refTerm(w string) string { return norm.NFC.String(Fold(norm.NFC.String(w))) }

func FuzzTerms(f *testing.F) {
	for _, s := range []string{
		"", "hello", "Hello, World!", "hello hello HELLO", "helloworld",
		"Ünïcödé 日本語", "foo-bar_baz", "İstanbul", "ΣΊΣΥΦΟΣ σίσυφος", "\xff\xfe",
		"a\xffb", "x2 ٣", "😀hello😀", "\u00a0\u3000", "ǅungla ǈ", "K\u212a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		terms := Terms(s)
		seen := make(map[string]bool)
		for _, term := range terms {
			if term == "" {
				t.Fatalf("Terms(%q) = %q, holds an empty term", s, terms)
			}
			if seen[term] {
				t.Fatalf("Terms(%q) = %q, holds %q twice", s, terms, term)
			}
			seen[term] = true
			if !utf8.ValidString(term) {
				t.Fatalf("Terms(%q) = %q, holds invalid UTF-8 %q", s, terms, term)
			}
		}
		// Every word of the input is one of its terms, folded and composed;
		// words too long for an index key are keyed by prefix and digest.
		words := strings.FieldsFunc(s, notWordRune)
		for _, w := range words {
			key := string(termKey(nil, []byte(w)))
			if !seen[key] {
				t.Fatalf("Terms(%q) = %q, misses word %q", s, terms, w)
			}
			if ref := refTerm(w); len(ref) <= maxTermBytes && key != ref {
				t.Fatalf("termKey(%q) = %q, want %q", w, key, ref)
			}
			if len(key) > maxTermBytes {
				t.Fatalf("termKey(%q) = %q, longer than %d bytes", w, key, maxTermBytes)
			}
		}
		if len(terms) > len(words) {
			t.Fatalf("Terms(%q) = %q, more terms than the %d words", s, terms, len(words))
		}
		// A text always contains its own words.
		if !containsTerms([]byte(s), terms) {
			t.Fatalf("containsTerms(%q, Terms(itself) = %q) = false", s, terms)
		}
		// Terms is deterministic.
		if again := Terms(s); !slices.Equal(again, terms) {
			t.Fatalf("Terms(%q) = %q then %q", s, terms, again)
		}
		// What writers index is the set the stream filters by, in order.
		set := slices.Sorted(maps.Keys(ContentTerms(s)))
		if sorted := SortedTerms(s); !slices.Equal(sorted, set) {
			t.Fatalf("SortedTerms(%q) = %q, want the sorted ContentTerms %q", s, sorted, set)
		}
	})
}

func FuzzContainsTerms(f *testing.F) {
	for _, s := range [][2]string{
		{"hello world", "hello"},
		{"helloworld", "hello"},
		{"Hello, World!", "WORLD hello"},
		{"ÜNÏCÖDÉ text", "ünïcödé"},
		{"私は 日本語、テキスト", "日本語"},
		{"日本語テキスト", "日本語"},
		{"a\xffb", "a b"},
		{"İstanbul", "i̇stanbul"},
		{"ΣΊΣΥΦΟΣ", "σίσυφος"},
		{"", ""},
		{"x", ""},
		{"", "x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, content, query string) {
		terms := Terms(query)
		got := containsTerms([]byte(content), terms)
		if want := refContainsTerms(content, query); got != want {
			t.Fatalf("containsTerms(%q, Terms(%q) = %q) = %v, reference says %v", content, query, terms, got, want)
		}
		// The order of the terms does not matter.
		rev := slices.Clone(terms)
		slices.Reverse(rev)
		if again := containsTerms([]byte(content), rev); again != got {
			t.Fatalf("containsTerms(%q, %q) = %v but reversed terms give %v", content, terms, got, again)
		}
		// Appending the query as separate words makes the content match.
		if !containsTerms([]byte(content+" "+query), terms) {
			t.Fatalf("containsTerms(%q, Terms(%q)) = false after appending the query", content+" "+query, query)
		}
	})
}

// containsTerms is the rule search (through the index) and live streams
// (through ContentTerms) apply to one message: it holds every term of the
// query as a whole word; terms come from Terms.
func containsTerms(content []byte, terms []string) bool {
	return HasAllTerms(ContentTerms(string(content)), terms)
}

// TestWordRuneAtASCII: the ASCII shortcut answers as Unicode's tables do
// for every byte below 0x80.
func TestWordRuneAtASCII(t *testing.T) {
	for c := range byte(utf8.RuneSelf) {
		in, size := wordRuneAt([]byte{c}, 0)
		if want := isWordRune(rune(c)); in != want || size != 1 {
			t.Errorf("wordRuneAt(%q) = %v, %d; want %v, 1", c, in, size, want)
		}
	}
}
