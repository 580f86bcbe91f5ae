package model

import (
	"strings"
	"testing"
)

func TestSkeleton(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"Latin", "paypal", "paypal"},
		{"CyrillicLookAlike", "\u0440\u0430\u0443\u0440\u0430l", "paypal"},
		{"ManyToOne", "m", "rn"},
		{"DefaultIgnorableDropped", "a\u200bb\u00adc", "abc"},
		{"Decomposed", "\u00e9", "e\u0301"},
		{"MathematicalLetters", "\U0001d52d\U0001d4b6\u1eff\U0001d561\U0001d552\u2113", "paypal"},
		{"Greek", "\u03b1\u03bb\u03c6\u03b1", "a\u03bb\u0278a"},
		{"Empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Skeleton(tt.in); got != tt.want {
				t.Errorf("Skeleton(%+q) = %+q, want %+q", tt.in, got, tt.want)
			}
		})
	}
}

// TestConfusablesTable checks the generated table as the lookup reads it:
// sorted by source, so that every mapping is found.
func TestConfusablesTable(t *testing.T) {
	if len(confusables) < 6000 {
		t.Fatalf("%d mappings; confusables.txt has over 6,000", len(confusables))
	}
	for i, c := range confusables {
		if i > 0 && confusables[i-1].from >= c.from {
			t.Fatalf("mapping %d (U+%04X) is not after U+%04X", i, c.from, confusables[i-1].from)
		}
		if got, ok := prototype(c.from); !ok || got != c.to {
			t.Errorf("prototype(U+%04X) = %+q, %v; want %+q", c.from, got, ok, c.to)
		}
	}
	if _, ok := prototype('r'); ok {
		t.Errorf("prototype('r') found; confusables.txt does not map it")
	}
}

// TestEmailLookAlikes: the look-alikes of root@example.com that issue 50
// saw register beside it are each refused as an address, or have its
// skeleton and so are taken; addresses wholly in one script, and Latin
// with accents, are valid and each their own.
func TestEmailLookAlikes(t *testing.T) {
	const real = "root@example.com"
	tests := []struct {
		name    string
		email   string
		refusal string // part of the violation's message; "" for a valid address
	}{
		{"SmallRomanNumeralThousand", "root@exa\u217fple.com", "styled forms"},
		{"CopticO", "ro\u2c9ft@example.com", "Latin and Coptic"},
		{"FullwidthR", "\uff52oot@example.com", "styled forms"},
		{"SmallCapitalO", "r\u1d0fot@example.com", ""},
		{"ArmenianOh", "r\u0585ot@example.com", "Latin and Armenian"},
		{"IdeographicFullStop", "root@example\u3002com", "ideographic full stop"},
		{"MathematicalMonospaceR", "\U0001d69boot@example.com", "styled forms"},
		{"CyrillicO", "r\u043e\u043et@example.com", "Latin and Cyrillic"},
		{"OtherCase", "Root@Example.COM", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v ValidationError
			v.CheckEmail("email", NormalizeEmail(tt.email))
			switch {
			case tt.refusal == "" && len(v.Violations) > 0:
				t.Errorf("CheckEmail(%q) = %v, want valid", tt.email, v.Violations)
			case tt.refusal != "" && (len(v.Violations) != 1 || !strings.Contains(v.Violations[0].Message, tt.refusal)):
				t.Errorf("CheckEmail(%q) = %v, want one violation saying %q", tt.email, v.Violations, tt.refusal)
			}
			// Refused or not, it is taken: an account from before the
			// rules held (see the stores' upgrades) keeps it.
			if got, want := EmailSkeleton(tt.email), EmailSkeleton(real); got != want {
				t.Errorf("EmailSkeleton(%q) = %+q, want %+q, the skeleton of %s", tt.email, got, want, real)
			}
		})
	}

	legitimate := []string{
		real,
		"иван@пример.рф",
		"αλφα@παράδειγμα.ελ",
		"やまだ@例え.テスト",
		"山田太郎@例え.jp",
		"taro山田@example.jp",
		"홍길동@예시.한국",
		"用户@例子.广告",
		"मनोज@उदाहरण.भारत",
		"ada@bücher.de",
		"josé@example.com",
		"jose@example.com",
		"o'brien+herald@mail.example.ie",
	}
	seen := make(map[string]string)
	for _, email := range legitimate {
		var v ValidationError
		v.CheckEmail("email", email)
		if len(v.Violations) > 0 {
			t.Errorf("CheckEmail(%q) = %v, want valid", email, v.Violations)
		}
		sk := EmailSkeleton(email)
		if other, ok := seen[sk]; ok {
			t.Errorf("%s and %s share the skeleton %+q", other, email, sk)
		}
		seen[sk] = email
	}
}

// TestEmailSkeletonWholeScript: an address written wholly in Cyrillic
// is valid, and taken when it looks like a Latin one already registered.
func TestEmailSkeletonWholeScript(t *testing.T) {
	const cyrillic, latin = "\u0430\u0440\u0435@example.com", "ape@example.com"
	var v ValidationError
	v.CheckEmail("email", cyrillic)
	if len(v.Violations) > 0 {
		t.Fatalf("CheckEmail(%q) = %v, want valid", cyrillic, v.Violations)
	}
	if EmailKey(cyrillic) == EmailKey(latin) {
		t.Fatalf("EmailKey makes %q and %q one address", cyrillic, latin)
	}
	if got, want := EmailSkeleton(cyrillic), EmailSkeleton(latin); got != want {
		t.Errorf("EmailSkeleton(%q) = %+q, want %+q", cyrillic, got, want)
	}
}
