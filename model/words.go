package model

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// A word is a maximal run of Unicode letters, digits and combining marks;
// everything else separates words. Marks belong to the word they sit in:
// without them Hindi "नमस्ते" or a decomposed "cafe\u0301" would split into
// pieces that match as if they were whole words. Words compare
// case-insensitively and in any Unicode normalisation form, as their index
// term (see termKey). One splitter, words, serves queries and content alike,
// so a query can only ever ask for terms the index can hold.

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

// MaxQueryTerms bounds the distinct words of one search: each word is a
// posting list the search intersects, so more words means more seeks.
const MaxQueryTerms = 16

// maxTermBytes bounds an index key's word part. A word longer than that is
// keyed by its first bytes plus a digest of the whole (see termKey), so keys
// stay far below bbolt's key-size limit while matching stays exact.
const maxTermBytes = 64

// Terms splits a search query into its distinct index terms (see termKey), in
// order of first appearance.
func Terms(q string) []string {
	var terms []string
	seen := make(map[string]bool)
	for word := range words([]byte(q)) {
		w := string(termKey(nil, word))
		if !seen[w] {
			seen[w] = true
			terms = append(terms, w)
		}
	}
	return terms
}

// ContentTerms is the set of index terms of content: what the inverted index
// holds for a message, and the only thing search compares queries with. A
// live stream computes it once per change to filter for every subscriber.
func ContentTerms(content string) map[string]struct{} {
	set := make(map[string]struct{})
	var buf []byte
	for word := range words([]byte(content)) {
		buf = termKey(buf[:0], word)
		if _, ok := set[string(buf)]; !ok {
			set[string(buf)] = struct{}{}
		}
	}
	return set
}

// HasAllTerms reports whether set, the ContentTerms of a message, holds
// every one of terms, a query's Terms: the rule search and live streams
// both apply to decide that a message matches.
func HasAllTerms(set map[string]struct{}, terms []string) bool {
	for _, t := range terms {
		if _, ok := set[t]; !ok {
			return false
		}
	}
	return true
}

// SortedTerms is ContentTerms as a sorted list. Writers compute it before
// they queue for the write transaction — splitting, composing and folding
// is the costliest part of indexing, and outside the transaction it runs
// on every core instead of in the single committer — and insert in key
// order, which keeps bbolt's cursor near its last position.
//
// It folds every word into one buffer and sorts slices of it, with no set
// to hash into: the terms share one allocation, so whoever keeps one for
// long (the tail's in-memory index) keeps a copy.
func SortedTerms(content string) []string {
	var buf []byte
	var ends []int
	for word := range words([]byte(content)) {
		buf = termKey(buf, word)
		ends = append(ends, len(buf))
	}
	all := string(buf)
	terms := make([]string, len(ends))
	start := 0
	for i, end := range ends {
		terms[i], start = all[start:end], end
	}
	slices.Sort(terms)
	return slices.Compact(terms)
}

// termKey appends the index form of word to dst: NFC-normalised and
// case-folded, so "café" typed as one code point or as "e" plus a combining
// accent, in any letter case, is one term. Folding can leave a sequence
// that is no longer composed, hence NFC on both sides of it. Words longer
// than maxTermBytes keep a prefix and a digest of the whole folded word.
func termKey(dst, word []byte) []byte {
	start := len(dst)
	if isASCII(word) {
		dst = appendFolded(dst, word)
	} else {
		dst = appendFolded(dst, norm.NFC.Bytes(word))
		if !norm.NFC.IsNormal(dst[start:]) {
			composed := norm.NFC.Bytes(dst[start:])
			dst = append(dst[:start], composed...)
		}
	}
	if len(dst)-start <= maxTermBytes {
		return dst
	}
	sum := sha256.Sum256(dst[start:])
	cut := start + maxTermBytes - 1 - 2*digestBytes
	for cut > start && !utf8.RuneStart(dst[cut]) {
		cut--
	}
	dst = append(dst[:cut], longTermMark)
	return hex.AppendEncode(dst, sum[:digestBytes])
}

// longTermMark separates a long word's prefix from its digest. It is not a
// word rune, so no ordinary term can contain it.
const (
	longTermMark = 0x01
	digestBytes  = 8
)

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// wordRuneAt reports whether the rune at content[i] is part of a word,
// and its size. Most text is ASCII, where a byte's range answers without
// decoding it or consulting Unicode's tables.
func wordRuneAt(content []byte, i int) (bool, int) {
	if c := content[i]; c < utf8.RuneSelf {
		lower := c | 0x20 // 'A'–'Z' to 'a'–'z'; no other byte lands there
		return 'a' <= lower && lower <= 'z' || '0' <= c && c <= '9', 1
	}
	r, size := utf8.DecodeRune(content[i:])
	return isWordRune(r), size
}

// words yields each word of content in order, as sub-slices of content.
func words(content []byte) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for i := 0; i < len(content); {
			in, size := wordRuneAt(content, i)
			if !in {
				i += size
				continue
			}
			start := i
			for i < len(content) {
				if in, size = wordRuneAt(content, i); !in {
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
		if c := word[i]; c < utf8.RuneSelf {
			dst = append(dst, byte(foldRune(rune(c))))
			i++
			continue
		}
		r, size := utf8.DecodeRune(word[i:])
		dst = utf8.AppendRune(dst, foldRune(r))
		i += size
	}
	return dst
}
