package model

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// RoleUser is the role every registered account holds; creating messages
// requires it.
const RoleUser = "ROLE_USER"

// RoleAdmin is held by administrators. It is stored with the account, and
// only an administrator, or the operator on the server's machine, grants
// it: nothing a client sends about itself does.
const RoleAdmin = "ROLE_ADMIN"

// Limits on account fields.
const (
	MaxEmailBytes    = 254 // RFC 5321's path limit, less the angle brackets
	MinPasswordChars = 8
	MaxPasswordBytes = 1024 // bounds the work a single login can ask of argon2
)

// User is an account. PasswordHash is an encoded argon2id string and never
// leaves the server.
type User struct {
	ID    uint64
	Email string // as registered, trimmed; unique case-insensitively and by its look (EmailSkeleton)
	// Handle is how others address the account (@ada): unique, lower-case,
	// by CheckHandle's rules. Name is how it is shown (Ada Lovelace).
	Handle       string
	Name         string
	PasswordHash string
	Roles        []string
	CreatedAt    time.Time
	// Suspended accounts hold no token and cannot log in; their e-mail
	// stays taken and their messages stay until removed.
	Suspended bool
	// LastSeenAt is when the account last logged in or used a token, to
	// within model.TokenUseGranularity; zero when never known.
	LastSeenAt time.Time
}

// HasRole reports whether the user holds role.
func (u *User) HasRole(role string) bool {
	for _, r := range u.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// CanAdminister reports whether u may administer: it holds RoleAdmin and
// is not suspended.
func (u *User) CanAdminister() bool { return u.HasRole(RoleAdmin) && !u.Suspended }

// NewAccount is u as a store keeps a new account: its e-mail normalised
// and checked, its password hash present. Errors: ErrInvalid.
//
// A handle or name u brings is normalised and checked; without a handle
// the store makes one (HandleBase), and without a name the account is
// shown by its handle.
func NewAccount(u *User) (User, error) {
	nu := *u
	nu.Email = NormalizeEmail(nu.Email)
	nu.Handle = NormalizeHandle(nu.Handle)
	nu.Name = NormalizeName(nu.Name)
	var v ValidationError
	v.CheckEmail("email", nu.Email)
	if nu.Handle != "" {
		v.CheckHandle("handle", nu.Handle)
	}
	if u.Name != "" {
		v.CheckName("name", nu.Name)
	}
	if err := v.Err(); err != nil {
		return nu, err
	}
	if nu.PasswordHash == "" {
		return nu, fmt.Errorf("create user: empty password hash")
	}
	return nu, nil
}

// Registration is what a client sends to create an account, before the
// password is hashed.
type Registration struct {
	Email    string
	Password string
	// Handle and Name are optional: without them the store makes a
	// handle from the e-mail, and the account is named by its handle.
	// NameSent says a name was sent, which must then follow the rules,
	// even when it is blank.
	Handle   string
	Name     string
	NameSent bool
}

// Normalize trims the e-mail (spaces around an address are never meant)
// and puts the handle and name in the form they are stored in.
func (r *Registration) Normalize() {
	r.Email = NormalizeEmail(r.Email)
	r.Handle = NormalizeHandle(r.Handle)
	r.Name = NormalizeName(r.Name)
}

// Validate reports every rule the registration breaks.
func (r *Registration) Validate() error {
	var v ValidationError
	v.CheckEmail("email", r.Email)
	v.CheckNewPassword("password", r.Password)
	if r.Handle != "" {
		v.CheckHandle("handle", r.Handle)
	}
	if r.NameSent {
		v.CheckName("name", r.Name)
	}
	return v.Err()
}

// CheckNewPassword adds to v a violation naming field when password breaks
// the rules for a new password.
func (v *ValidationError) CheckNewPassword(field, password string) {
	switch {
	case strings.TrimSpace(password) == "":
		v.Add(field, "must not be blank or only spaces")
	case !utf8.ValidString(password):
		v.Add(field, "must be valid UTF-8")
	case utf8.RuneCountInString(password) < MinPasswordChars:
		v.Add(field, fmt.Sprintf("must be at least %d characters", MinPasswordChars))
	case len(password) > MaxPasswordBytes:
		v.Add(field, fmt.Sprintf("must be at most %d bytes", MaxPasswordBytes))
	}
}

// NormalizeEmail is the form an address is stored and shown in.
func NormalizeEmail(s string) string { return strings.TrimSpace(s) }

// EmailKey is the form an address is compared and indexed in, so that
// Ada@Example.com and ada@example.com are one account: the key for
// anything that must treat two spellings of one address as one (the
// e-mail index, the guessing limits). NFC first: "é" may arrive as one
// code point or as "e" plus a combining accent, and two spellings of one
// address must not become two accounts.
func EmailKey(email string) string {
	return Fold(norm.NFC.String(NormalizeEmail(email)))
}

// CheckEmail adds to v a violation naming field unless email is a
// plausible address: one '@' with something on each side, no spaces or
// control characters. Deliverability is not ours to judge; whether the
// address could pass for another is: invisible characters, styled forms,
// an ideographic full stop in the domain and scripts mixed within one
// part are refused (an address like an account's is the stores' to
// refuse, see EmailSkeleton).
func (v *ValidationError) CheckEmail(field, email string) {
	switch {
	case email == "":
		v.Add(field, "must not be blank")
		return
	case !utf8.ValidString(email):
		v.Add(field, "must be valid UTF-8")
		return
	case len(email) > MaxEmailBytes:
		v.Add(field, fmt.Sprintf("must be at most %d bytes", MaxEmailBytes))
		return
	}
	local, domain, ok := strings.Cut(email, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") {
		v.Add(field, "must be an e-mail address like name@example.com")
		return
	}
	if strings.IndexFunc(email, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		v.Add(field, "must not contain spaces or control characters")
		return
	}
	// The owner's e-mail is what other people see on every message, so it
	// must look like what it is.
	if i := strings.IndexFunc(email, isInvisible); i >= 0 {
		r, _ := utf8.DecodeRuneInString(email[i:])
		v.Add(field, fmt.Sprintf("must not contain invisible characters (U+%04X)", r))
		return
	}
	// Styled forms (fullwidth, mathematical, small Roman numerals...) draw
	// an ordinary letter in another code point, which is all a forger
	// needs; NFKC maps each to the letter it stands for.
	if i := strings.IndexFunc(email, isCompatibilityForm); i >= 0 {
		r, _ := utf8.DecodeRuneInString(email[i:])
		v.Add(field, fmt.Sprintf("must not contain styled forms of characters, such as fullwidth or mathematical letters (U+%04X is %q styled); type the plain characters instead", r, norm.NFKC.String(string(r))))
		return
	}
	if strings.Contains(domain, ideographicFullStop) {
		v.Add(field, "must separate the parts of the domain with '.', not with the ideographic full stop (U+3002)")
		return
	}
	for _, part := range append([]string{local}, strings.Split(domain, ".")...) {
		if a, b, mixed := mixedScripts(part); mixed {
			v.Add(field, fmt.Sprintf("must not mix %s and %s letters in one part (%q), a common way to imitate another address", a, b, part))
			return
		}
	}
}

// isCompatibilityForm reports runes that NFKC maps to other characters
// than NFC does: the styled and compatibility forms of plain characters.
func isCompatibilityForm(r rune) bool {
	if r < utf8.RuneSelf {
		return false
	}
	s := string(r)
	return norm.NFKC.String(s) != norm.NFC.String(s)
}

// isInvisible reports runes that render as nothing or as blank space, the
// raw material of an address that looks like someone else's: format
// characters (zero-width spaces and joiners, bidirectional overrides, the
// soft hyphen), private-use, surrogate and unassigned code points, variation
// selectors, and the fillers that draw as blanks.
func isInvisible(r rune) bool {
	// Not printable: format, control, private-use, surrogate and unassigned
	// code points, and every space but U+0020 (refused before this).
	if !unicode.IsPrint(r) || unicode.Is(unicode.Variation_Selector, r) {
		return true
	}
	switch r {
	case '\u034F', // combining grapheme joiner
		'\u115F', '\u1160', '\u3164', '\uFFA0', // Hangul fillers
		'\u2800': // braille blank
		return true
	}
	return false
}

// mixedScripts reports whether the letters of part belong to more than
// one script, and names two of them, unless they are a mix a language is
// written in: Han with Hiragana and Katakana (Japanese), with Hangul
// (Korean) or with Bopomofo (Chinese), any of these with Latin too (UTS
// #39's "highly restrictive" level). Digits, punctuation and combining
// marks belong to every script. A look-alike written wholly in another
// script (every letter Cyrillic) passes: EmailSkeleton finds it, but only
// once the address it imitates is registered, where this rule refuses the
// forgery before the real owner comes.
func mixedScripts(part string) (first, second string, mixed bool) {
	var used []string
	for _, r := range part {
		name := scriptOf(r)
		if name == "" || slices.Contains(used, name) {
			continue
		}
		used = append(used, name)
		if len(used) > 1 && !writtenTogether(used) {
			return used[0], name, true
		}
	}
	return "", "", false
}

// scriptsWrittenTogether are the sets of scripts one language mixes.
var scriptsWrittenTogether = [][]string{
	{"Latin", "Han", "Hiragana", "Katakana"},
	{"Latin", "Han", "Hangul"},
	{"Latin", "Han", "Bopomofo"},
}

// writtenTogether reports whether every script of used belongs to one of
// scriptsWrittenTogether.
func writtenTogether(used []string) bool {
	for _, set := range scriptsWrittenTogether {
		all := true
		for _, s := range used {
			all = all && slices.Contains(set, s)
		}
		if all {
			return true
		}
	}
	return false
}

// scriptOf is the name of r's script (Unicode's Script property), or ""
// for the Common and Inherited scripts, which every script uses.
func scriptOf(r rune) string {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' {
			return "Latin"
		}
		return ""
	}
	if unicode.In(r, unicode.Common, unicode.Inherited) {
		return ""
	}
	for name, table := range unicode.Scripts {
		if unicode.Is(table, r) {
			return name
		}
	}
	return ""
}
