package model

import (
	"slices"
	"strings"
	"testing"
)

func TestCheckHandle(t *testing.T) {
	for _, tc := range []struct {
		handle string
		want   string // the violation, "" for none
	}{
		{"ada", ""},
		{"ab", ""},
		{"a_1", ""},
		{strings.Repeat("a", 30), ""},
		{"", "must not be blank"},
		{"a", "must be 2 to 30 characters"},
		{strings.Repeat("a", 31), "must be 2 to 30 characters"},
		{"1ada", "must start with a letter (a-z)"},
		{"_ada", "must start with a letter (a-z)"},
		{"ada-l", "must contain only the letters a-z, digits and _"},
		{"ada.l", "must contain only the letters a-z, digits and _"},
		{"adé", "must contain only the letters a-z, digits and _"},
		{"Ada", "must start with a letter (a-z)"}, // checked after NormalizeHandle, which lower-cases
	} {
		var v ValidationError
		v.CheckHandle("handle", tc.handle)
		got := ""
		if len(v.Violations) > 0 {
			got = v.Violations[0].Message
		}
		if got != tc.want {
			t.Errorf("CheckHandle(%q) = %q, want %q", tc.handle, got, tc.want)
		}
	}
}

func TestNormalizeHandle(t *testing.T) {
	if got := NormalizeHandle("  Ada_L "); got != "ada_l" {
		t.Errorf("NormalizeHandle = %q, want ada_l", got)
	}
}

func TestHandleBase(t *testing.T) {
	for _, tc := range []struct{ email, want string }{
		{"ada@example.com", "ada"},
		{"Ada.Lovelace@example.com", "adalovelace"},
		{"ada_l+herald@example.com", "ada_lherald"},
		{"42ada@example.com", "ada"},
		{"_x9@example.com", "x9"},
		{"a@example.com", "user"},
		{"1@example.com", "user"},
		{"élodie@example.com", "lodie"},
		{"日本@example.com", "user"},
		{strings.Repeat("b", 40) + "@example.com", strings.Repeat("b", 30)},
	} {
		if got := HandleBase(tc.email); got != tc.want {
			t.Errorf("HandleBase(%q) = %q, want %q", tc.email, got, tc.want)
		}
	}
}

func TestHandleCandidate(t *testing.T) {
	long := strings.Repeat("b", 30)
	for _, tc := range []struct {
		base string
		n    int
		want string
	}{
		{"ada", 1, "ada"},
		{"ada", 2, "ada2"},
		{"ada", 10, "ada10"},
		{long, 2, strings.Repeat("b", 29) + "2"},
		{long, 123, strings.Repeat("b", 27) + "123"},
	} {
		got := HandleCandidate(tc.base, tc.n)
		if got != tc.want {
			t.Errorf("HandleCandidate(%q, %d) = %q, want %q", tc.base, tc.n, got, tc.want)
		}
		var v ValidationError
		if v.CheckHandle("handle", got); v.Err() != nil {
			t.Errorf("HandleCandidate(%q, %d) = %q breaks the rules: %v", tc.base, tc.n, got, v.Err())
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want string
	}{
		{"Ada Lovelace", ""},
		{"アダ", ""},
		{strings.Repeat("é", 64), ""},
		{"", "must not be blank"},
		{strings.Repeat("é", 65), "must be at most 64 characters"},
		{"Ada\u202eecalevoL", "must not contain control or invisible formatting characters (U+202E)"},
		{"Ada\u200b", "must not contain control or invisible formatting characters (U+200B)"},
		{"Ada\nL", "must not contain control or invisible formatting characters (U+000A)"},
		{"Ada\xff", "must be valid UTF-8"},
	} {
		var v ValidationError
		v.CheckName("name", tc.name)
		got := ""
		if len(v.Violations) > 0 {
			got = v.Violations[0].Message
		}
		if got != tc.want {
			t.Errorf("CheckName(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := NormalizeName("  Ade\u0301le "); got != "Adèle" && got != "Ad\u00e9le" {
		t.Errorf("NormalizeName = %q, want trimmed NFC", got)
	}
}

func TestMentionedHandles(t *testing.T) {
	for _, tc := range []struct {
		content string
		want    []string
	}{
		{"hi @ada", []string{"ada"}},
		{"@Ada and @ADA and @ada", []string{"ada"}},
		{"@bobby", []string{"bobby"}},
		{"bob@carl", nil},
		{"mail bob@carl.example", nil},
		{"(@ada) @bob, @carl.", []string{"ada", "bob", "carl"}},
		{"@ada@bob", []string{"ada"}},
		{"é@ada", []string{"ada"}},
		{"@a @1ada @_x @" + strings.Repeat("z", 31), nil},
		{"@bob_2 then @ada", []string{"bob_2", "ada"}},
		{"@@ada", []string{"ada"}},
		{"@", nil},
	} {
		if got := MentionedHandles(tc.content); !slices.Equal(got, tc.want) {
			t.Errorf("MentionedHandles(%q) = %q, want %q", tc.content, got, tc.want)
		}
	}
}

func FuzzMentionedHandles(f *testing.F) {
	for _, s := range []string{"hi @ada", "bob@carl", "@@a_b @ZZ", "é@x1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		seen := map[string]bool{}
		for _, h := range MentionedHandles(content) {
			var v ValidationError
			if v.CheckHandle("handle", h); v.Err() != nil {
				t.Fatalf("%q: mention %q is no handle: %v", content, h, v.Err())
			}
			if seen[h] {
				t.Fatalf("%q: mention %q twice", content, h)
			}
			seen[h] = true
			if !strings.Contains(strings.ToLower(content), "@"+h) {
				t.Fatalf("%q: mention %q not in the content", content, h)
			}
		}
	})
}
