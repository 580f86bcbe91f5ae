package bolt

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// A word is a maximal run of Unicode letters, digits and combining marks;
// everything else separates words. Marks belong to the word they sit in:
// without them Hindi "नमस्ते" or a decomposed "cafe\u0301" would split into
// pieces that match as if they were whole words. Words compare
// case-insensitively, in their folded form (see foldRune). One splitter,
// words, serves queries and content alike (and will key the inverted index),
// so a query can only ever ask for words the content can contain.

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// foldRune maps a rune to the form compared by case-insensitive matching.
// Lower-casing alone is not enough: Σ lowers to σ but never to the final ς,
// and the Kelvin sign or long s have no lower-case twin of their letter.
// Going through upper case first joins those, as strings.EqualFold does.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	return unicode.ToLower(unicode.ToUpper(r))
}

// Fold returns s in its case-folded form, rune by rune.
func Fold(s string) string { return strings.Map(foldRune, s) }

// Terms splits a search query into its distinct folded words, in order of
// first appearance.
func Terms(q string) []string {
	var terms []string
	seen := make(map[string]bool)
	for word := range words([]byte(q)) {
		w := string(appendFolded(nil, word))
		if !seen[w] {
			seen[w] = true
			terms = append(terms, w)
		}
	}
	return terms
}

// ContainsTerms reports whether content holds every term as a whole word.
// terms must come from Terms. Search calls it for every message it scans, so
// it walks content once and, for up to 64 terms and words of up to 64 bytes,
// allocates nothing.
func ContainsTerms(content []byte, terms []string) bool {
	if len(terms) == 0 {
		return true
	}
	if len(terms) > 64 {
		return containsManyTerms(content, terms)
	}
	var found uint64
	all := uint64(1)<<len(terms) - 1
	if len(terms) == 64 {
		all = ^uint64(0)
	}
	var buf [64]byte
	for word := range words(content) {
		folded := appendFolded(buf[:0], word)
		for t, term := range terms {
			if found&(1<<t) == 0 && string(folded) == term {
				if found |= 1 << t; found == all {
					return true
				}
			}
		}
	}
	return false
}

// containsManyTerms is ContainsTerms without the 64-term bitmask.
func containsManyTerms(content []byte, terms []string) bool {
	for _, term := range terms {
		if !ContainsTerms(content, []string{term}) {
			return false
		}
	}
	return true
}

// words yields each word of content in order, as sub-slices of content.
func words(content []byte) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for i := 0; i < len(content); {
			r, size := utf8.DecodeRune(content[i:])
			if !isWordRune(r) {
				i += size
				continue
			}
			start := i
			for i < len(content) {
				r, size = utf8.DecodeRune(content[i:])
				if !isWordRune(r) {
					break
				}
				i += size
			}
			if !yield(content[start:i]) {
				return
			}
		}
	}
}

// appendFolded appends the folded form of word to dst, matching Fold.
func appendFolded(dst, word []byte) []byte {
	for i := 0; i < len(word); {
		r, size := utf8.DecodeRune(word[i:])
		dst = utf8.AppendRune(dst, foldRune(r))
		i += size
	}
	return dst
}
