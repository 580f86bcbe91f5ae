package model

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Handles and names: how a person is addressed (@ada) and shown (Ada
// Lovelace). A handle is the address, so it is kept to characters that
// read the same everywhere: it cannot be made to look like another, and
// `@handle` can be found in any text without a parser.
const (
	MinHandleChars = 2
	MaxHandleChars = 30
	MaxNameChars   = 64
	// MaxMentions is how many accounts one message may mention; further
	// @handles are plain text, so one message cannot notify a crowd.
	MaxMentions = 20
	// fallbackHandle is the handle made for an e-mail whose local part
	// leaves too few handle characters.
	fallbackHandle = "user"
)

// NormalizeHandle is the form a handle is stored, shown and compared in:
// sent in any case, kept lower-case, so @Ada and @ada are one person.
func NormalizeHandle(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// isHandleChar reports the characters a handle is made of, in the form it
// is stored in.
func isHandleChar(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '_'
}

// isHandleCharAnyCase is isHandleChar before lower-casing: what can be
// part of a handle written in a message.
func isHandleCharAnyCase(b byte) bool { return isHandleChar(b) || b >= 'A' && b <= 'Z' }

// CheckHandle adds to v a violation naming field unless handle, already
// normalised, follows the rules: 2–30 characters of a-z, 0-9 and _,
// starting with a letter.
func (v *ValidationError) CheckHandle(field, handle string) {
	switch {
	case handle == "":
		v.Add(field, "must not be blank")
	case len(handle) < MinHandleChars || len(handle) > MaxHandleChars:
		v.Add(field, fmt.Sprintf("must be %d to %d characters", MinHandleChars, MaxHandleChars))
	case handle[0] < 'a' || handle[0] > 'z':
		v.Add(field, "must start with a letter (a-z)")
	case strings.IndexFunc(handle, func(r rune) bool { return r >= utf8.RuneSelf || !isHandleChar(byte(r)) }) >= 0:
		v.Add(field, "must contain only the letters a-z, digits and _")
	}
}

// HandleBase is the handle an account without one starts from, made from
// its e-mail's local part: lower-cased, with every character a handle
// cannot hold dropped, and the characters before the first letter; when
// fewer than two are left, "user". It leaves room for the number
// HandleCandidate adds when the base is taken.
func HandleBase(email string) string {
	local, _, _ := strings.Cut(NormalizeEmail(email), "@")
	var b strings.Builder
	for i := 0; i < len(local); i++ {
		c := local[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if !isHandleChar(c) || b.Len() == 0 && (c < 'a' || c > 'z') {
			continue
		}
		b.WriteByte(c)
	}
	h := b.String()
	if len(h) < MinHandleChars {
		return fallbackHandle
	}
	return h[:min(len(h), MaxHandleChars)]
}

// HandleCandidate is the n-th handle tried for base: base itself for n 1,
// then base2, base3..., cut so the number fits within MaxHandleChars.
func HandleCandidate(base string, n int) string {
	if n <= 1 {
		return base
	}
	suffix := strconv.Itoa(n)
	return base[:min(len(base), MaxHandleChars-len(suffix))] + suffix
}

// NormalizeName is the form a name is stored and shown in: trimmed, and
// NFC, so one name typed two ways is stored one way.
func NormalizeName(s string) string { return norm.NFC.String(strings.TrimSpace(s)) }

// CheckName adds to v a violation naming field unless name, already
// normalised, is 1–64 characters with no control or invisible formatting
// characters (categories Cc and Cf): a name is shown beside every message,
// and such characters could reorder or hide what is around it.
func (v *ValidationError) CheckName(field, name string) {
	switch {
	case !utf8.ValidString(name):
		v.Add(field, "must be valid UTF-8")
	case name == "":
		v.Add(field, "must not be blank")
	case utf8.RuneCountInString(name) > MaxNameChars:
		v.Add(field, fmt.Sprintf("must be at most %d characters", MaxNameChars))
	default:
		if i := strings.IndexFunc(name, func(r rune) bool { return unicode.In(r, unicode.Cc, unicode.Cf) }); i >= 0 {
			r, _ := utf8.DecodeRuneInString(name[i:])
			v.Add(field, fmt.Sprintf("must not contain control or invisible formatting characters (U+%04X)", r))
		}
	}
}

// MentionedHandles lists the handles content writes as @handle, each once,
// in order of first appearance, lower-cased: an '@' at the start or after
// a character that cannot be part of a handle, then the longest run of
// handle characters in any case. So "@bobby" names bobby, never bob, and
// "bob@carl" names nobody. Runs that cannot be handles (too long, or not
// starting with a letter) are left out; which of the rest are accounts is
// the store's to say, when the message is written.
func MentionedHandles(content string) []string {
	var handles []string
	seen := map[string]bool{}
	for i := 0; i < len(content); i++ {
		if content[i] != '@' || i > 0 && isHandleCharAnyCase(content[i-1]) {
			continue
		}
		j := i + 1
		for j < len(content) && isHandleCharAnyCase(content[j]) {
			j++
		}
		h := strings.ToLower(content[i+1 : j])
		i = j - 1
		var v ValidationError
		if v.CheckHandle("", h); v.Err() != nil || seen[h] {
			continue
		}
		seen[h] = true
		handles = append(handles, h)
	}
	return handles
}

// ProfileUpdate holds what PATCH /api/me may change; nil leaves it as it
// is.
type ProfileUpdate struct {
	Handle *string
	Name   *string
}

// Normalize puts the fields sent in the form they are stored in.
func (p *ProfileUpdate) Normalize() {
	if p.Handle != nil {
		h := NormalizeHandle(*p.Handle)
		p.Handle = &h
	}
	if p.Name != nil {
		n := NormalizeName(*p.Name)
		p.Name = &n
	}
}

// Validate reports every rule the fields sent break.
func (p *ProfileUpdate) Validate() error {
	var v ValidationError
	if p.Handle != nil {
		v.CheckHandle("handle", *p.Handle)
	}
	if p.Name != nil {
		v.CheckName("name", *p.Name)
	}
	return v.Err()
}

// Apply sets u's fields to those sent.
func (p *ProfileUpdate) Apply(u *User) {
	if p.Handle != nil {
		u.Handle = *p.Handle
	}
	if p.Name != nil {
		u.Name = *p.Name
	}
}
