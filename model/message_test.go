package model

import (
	"slices"
	"strings"
	"testing"
)

func TestMessageValidate(t *testing.T) {
	tests := []struct {
		name    string
		content string
		ok      bool
	}{
		{"OK", "hello", true},
		{"OneChar", "a", true},
		{"SurroundingSpaces", "  hello  ", true},
		{"Multiline", "line one\nline two", true},
		{"Emoji", "😀", true},
		{"10000ASCII", strings.Repeat("a", MaxContentChars), true},
		{"10000TwoByteRunes", strings.Repeat("é", MaxContentChars), true},
		{"10000ThreeByteRunes", strings.Repeat("日", MaxContentChars), true},
		{"10000FourByteRunes", strings.Repeat("😀", MaxContentChars), true},
		{"Blank", "", false},
		{"Spaces", "     ", false},
		{"ASCIIWhitespace", " \t\n\v\f\r ", false},
		{"UnicodeSpaces", "\u00a0\u1680\u2003\u2028\u2029\u202f\u205f\u3000\u0085", false},
		{"10001ASCII", strings.Repeat("a", MaxContentChars+1), false},
		{"10001ThreeByteRunes", strings.Repeat("日", MaxContentChars+1), false},
		{"InvalidUTF8", "hello \xff world", false},
		{"TruncatedRune", "hello \xe6\x97", false},
		{"Surrogate", "\xed\xa0\x80", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Message{Content: tt.content}
			err := m.Validate()
			if tt.ok {
				if err != nil {
					t.Errorf("Validate(%d bytes) = %v, want nil", len(tt.content), err)
				}
				return
			}
			if got, want := violationFields(t, err), []string{"content"}; !slices.Equal(got, want) {
				t.Errorf("Validate(%d bytes) fields = %q, want %q", len(tt.content), got, want)
			}
		})
	}
}
