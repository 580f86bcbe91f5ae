package bolt

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// A word is a maximal run of Unicode letters and digits; everything else
// separates words. Words compare case-insensitively, in their lower-case
// form. The same rule splits queries and content, and will key the inverted
// index, so a query can only ever ask for words the content can contain.

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// Terms splits a search query into its distinct lower-case words, in order of
// first appearance.
func Terms(q string) []string {
	var terms []string
	seen := make(map[string]bool)
	for w := range strings.FieldsFuncSeq(q, func(r rune) bool { return !isWordRune(r) }) {
		w = strings.ToLower(w)
		if !seen[w] {
			seen[w] = true
			terms = append(terms, w)
		}
	}
	return terms
}

// ContainsTerms reports whether content holds every term as a whole word.
// terms must come from Terms. It walks content once without allocating for
// words that are not candidates.
func ContainsTerms(content []byte, terms []string) bool {
	if len(terms) == 0 {
		return true
	}
	found := make([]bool, len(terms))
	missing := len(terms)
	var lower []byte
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
		lower = appendLower(lower[:0], content[start:i])
		for t, term := range terms {
			if !found[t] && string(lower) == term {
				found[t] = true
				if missing--; missing == 0 {
					return true
				}
			}
		}
	}
	return false
}

// appendLower appends the lower-case form of word to dst, matching
// strings.ToLower rune for rune.
func appendLower(dst, word []byte) []byte {
	for i := 0; i < len(word); {
		r, size := utf8.DecodeRune(word[i:])
		if r < utf8.RuneSelf {
			if 'A' <= r && r <= 'Z' {
				r += 'a' - 'A'
			}
			dst = append(dst, byte(r))
		} else {
			dst = utf8.AppendRune(dst, unicode.ToLower(r))
		}
		i += size
	}
	return dst
}
