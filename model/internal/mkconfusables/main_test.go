package main

import (
	"slices"
	"strings"
	"testing"
)

func TestParseConfusables(t *testing.T) {
	const in = "\ufeff# confusables.txt\n# Version: 17.0.0\n\n" +
		"2C9F ;\t006F ;\tMA\t# ( ⲟ → o ) COPTIC SMALL LETTER O → LATIN SMALL LETTER O\t#\n" +
		"006D ;\t0072 006E ;\tMA\t# ( m → rn )\n" +
		"0430 ;\t0061 ;\tMA\t# ( а → a )\n"
	ms, err := parseConfusables([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{{0x6D, "rn"}, {0x430, "a"}, {0x2C9F, "o"}}
	if !slices.Equal(ms, want) {
		t.Errorf("parseConfusables = %+q, want %+q, in order of source", ms, want)
	}
	for _, bad := range []string{
		"006D ; 0072 006E\n",                   // no type
		"006D ; 0072 ; SL\n",                   // another table's type
		"006D 006E ; 0072 ; MA\n",              // two sources
		"006D ; ; MA\n",                        // no target
		"006D ; 0072 ; MA\n006D ; 0061 ; MA\n", // mapped twice
		"# nothing\n",
	} {
		if _, err := parseConfusables([]byte(bad)); err == nil {
			t.Errorf("parseConfusables(%q) = nil error", bad)
		}
	}
}

func TestParseProperty(t *testing.T) {
	const in = "# DerivedCoreProperties\n" +
		"0041..005A    ; Alphabetic # L& [26]\n" +
		"00AD          ; Default_Ignorable_Code_Point # Cf       SOFT HYPHEN\n" +
		"200B..200F    ; Default_Ignorable_Code_Point # Cf   [5]\n" +
		"2060..2064    ; Default_Ignorable_Code_Point # Cf   [5]\n" +
		"2065          ; Default_Ignorable_Code_Point # Cn\n" +
		"E0000         ; Default_Ignorable_Code_Point # Cn\n"
	spans, err := parseProperty([]byte(in), "Default_Ignorable_Code_Point")
	if err != nil {
		t.Fatal(err)
	}
	want := []span{{0xAD, 0xAD}, {0x200B, 0x200F}, {0x2060, 0x2065}, {0xE0000, 0xE0000}}
	if !slices.Equal(spans, want) {
		t.Errorf("parseProperty = %x, want %x, touching ranges merged", spans, want)
	}
	src, err := table([]mapping{{0x6D, "rn"}}, spans)
	if err != nil {
		t.Fatalf("table: %v", err)
	}
	for _, s := range []string{`{0x006D, "rn"}`, "{Lo: 0x2060, Hi: 0x2065, Stride: 1}", "{Lo: 0xE0000, Hi: 0xE0000, Stride: 1}", "LatinOffset: 1"} {
		if !strings.Contains(string(src), s) {
			t.Errorf("the table lacks %s:\n%s", s, src)
		}
	}
}
