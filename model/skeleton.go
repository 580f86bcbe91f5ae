package model

import (
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// The table of confusables.txt is generated from Unicode's own data files,
// named with their version and SHA-256 at the top of confusables_table.go.
// Without network access, give the generator local copies of the same
// files: go run ./internal/mkconfusables -confusables FILE -properties FILE.
//
//go:generate go run ./internal/mkconfusables -o confusables_table.go

// confusable is one line of UTS #39's confusables.txt: a code point and its
// prototype, the string it is drawn like.
type confusable struct {
	from rune
	to   string
}

// Skeleton is the skeleton of s as UTS #39 defines it (internalSkeleton):
// s in NFD, without its default-ignorable code points, each code point
// replaced by its prototype, and in NFD again. Two strings drawn alike
// have the same skeleton. A skeleton is for comparing, never for showing:
// it mixes scripts freely ("paypal" in Cyrillic has Latin's skeleton).
func Skeleton(s string) string {
	s = norm.NFD.String(s)
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if unicode.Is(defaultIgnorable, r) {
			continue
		}
		if to, ok := prototype(r); ok {
			b.WriteString(to)
			continue
		}
		b.WriteRune(r)
	}
	return norm.NFD.String(b.String())
}

// prototype is what confusables.txt maps r to, if it maps r.
func prototype(r rune) (string, bool) {
	i, ok := slices.BinarySearchFunc(confusables[:], r, func(c confusable, r rune) int { return int(c.from - r) })
	if !ok {
		return "", false
	}
	return confusables[i].to, true
}

// EmailSkeleton is the form in which two addresses that look alike are
// one: the skeleton of the address in NFKC, case-folded, with the domain's
// ideographic full stops read as the dots they stand for in a domain
// name. At most one account holds each: an address whose skeleton is
// another account's is taken, as the same address in other letter case is
// (see EmailKey).
//
// Case is folded before the skeleton is taken, so "Ian" and "lan", drawn
// alike in many fonts, have two skeletons ("ian", "lan"): folding after
// would make "IAN" and "LAN" one, which they are not.
func EmailSkeleton(email string) string {
	s := Fold(norm.NFKC.String(NormalizeEmail(email)))
	if at := strings.LastIndexByte(s, '@'); at >= 0 {
		s = s[:at+1] + strings.ReplaceAll(s[at+1:], ideographicFullStop, ".")
	}
	return Skeleton(s)
}

// ideographicFullStop separates the labels of a domain name as '.' does
// (IDNA maps it to '.'), and NFKC leaves it as it is.
const ideographicFullStop = "\u3002"
