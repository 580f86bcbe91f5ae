package model

import (
	"slices"
	"strings"
	"testing"
)

func TestRegistrationValidate(t *testing.T) {
	const okPassword = "correct horse"
	// 121 two-byte runes + "@example.com" (12 bytes) = 254 bytes.
	email254 := strings.Repeat("é", 121) + "@example.com"
	email255 := "x" + email254
	if len(email254) != MaxEmailBytes || len(email255) != MaxEmailBytes+1 {
		t.Fatalf("test e-mails are %d and %d bytes", len(email254), len(email255))
	}

	tests := []struct {
		name     string
		email    string
		password string
		want     []string // fields named by the violations, in order
	}{
		{"OK", "ada@example.com", okPassword, nil},
		{"UnicodeEmail", "ünïcödé@例え.jp", okPassword, nil},
		{"Email254BytesMultiByte", email254, okPassword, nil},
		{"Email255Bytes", email255, okPassword, []string{"email"}},
		{"EmailBlank", "", okPassword, []string{"email"}},
		{"EmailSpacesOnly", "   ", okPassword, []string{"email"}},
		{"EmailNoAt", "ada.example.com", okPassword, []string{"email"}},
		{"EmailTwoAt", "ada@lovelace@example.com", okPassword, []string{"email"}},
		{"EmailEmptyLocal", "@example.com", okPassword, []string{"email"}},
		{"EmailEmptyDomain", "ada@", okPassword, []string{"email"}},
		{"EmailInnerSpace", "ada lovelace@example.com", okPassword, []string{"email"}},
		{"EmailInnerUnicodeSpace", "ada\u00a0lovelace@example.com", okPassword, []string{"email"}},
		{"EmailTab", "ada\t@example.com", okPassword, []string{"email"}},
		{"EmailNUL", "ada\x00@example.com", okPassword, []string{"email"}},
		{"EmailDEL", "ada\x7f@example.com", okPassword, []string{"email"}},
		{"EmailC1Control", "ada\u0085@example.com", okPassword, []string{"email"}},
		{"EmailInvalidUTF8", "ada\xff@example.com", okPassword, []string{"email"}},
		{"EmailUntrimmed", " ada@example.com ", okPassword, []string{"email"}},
		{"EmailZeroWidthSpace", "ada\u200b@example.com", okPassword, []string{"email"}},
		{"EmailZeroWidthJoiner", "a\u200dda@example.com", okPassword, []string{"email"}},
		{"EmailRightToLeftOverride", "\u202emoc.elpmaxe@ada", okPassword, []string{"email"}},
		{"EmailLeftToRightMark", "ada@example.com\u200e", okPassword, []string{"email"}},
		{"EmailSoftHyphen", "ada@exam\u00adple.com", okPassword, []string{"email"}},
		{"EmailByteOrderMark", "\ufeffada@example.com", okPassword, []string{"email"}},
		{"EmailWordJoiner", "ada\u2060@example.com", okPassword, []string{"email"}},
		{"EmailVariationSelector", "ada\ufe0f@example.com", okPassword, []string{"email"}},
		{"EmailGraphemeJoiner", "ada\u034f@example.com", okPassword, []string{"email"}},
		{"EmailHangulFiller", "ada\u3164@example.com", okPassword, []string{"email"}},
		{"EmailPrivateUse", "ada\ue000@example.com", okPassword, []string{"email"}},
		{"EmailTagCharacter", "ada\U000E0041@example.com", okPassword, []string{"email"}},
		{"EmailUnassigned", "ada\U0003FFFD@example.com", okPassword, []string{"email"}},
		{"EmailCyrillicAInLatin", "\u0430da@example.com", okPassword, []string{"email"}},
		{"EmailGreekOmicronInDomain", "ada@ex\u03bfmple.com", okPassword, []string{"email"}},
		{"EmailCyrillicLocalLatinDomain", "\u0430\u0434\u0430@example.com", okPassword, nil},
		{"EmailGreekAddress", "αλφα@παράδειγμα.ελ", okPassword, nil},
		{"EmailJapaneseMixesScripts", "ひらがなカタカナ漢字@例え.jp", okPassword, nil},
		{"EmailDigitsWithCyrillic", "\u0430\u04341@example.com", okPassword, nil},
		{"EmailFullwidthLetter", "\uff52oot@example.com", okPassword, []string{"email"}},
		{"EmailHalfwidthKatakana", "\uff76\uff80\uff76\uff85@example.jp", okPassword, []string{"email"}},
		{"EmailLigature", "\ufb01le@example.com", okPassword, []string{"email"}},
		{"EmailSuperscriptDigit", "ada\u00b2@example.com", okPassword, []string{"email"}},
		{"EmailIdeographicFullStopInDomain", "ada@example\u3002com", okPassword, []string{"email"}},
		{"EmailIdeographicFullStopInLocalPart", "ada\u3002lovelace@example.com", okPassword, nil},
		{"EmailArmenianInLatin", "r\u0585ot@example.com", okPassword, []string{"email"}},
		{"EmailCopticInLatin", "ro\u2c9ft@example.com", okPassword, []string{"email"}},
		{"EmailCherokeeInLatin", "\u13a0ave@example.com", okPassword, []string{"email"}},
		{"EmailLatinSmallCapital", "r\u1d0fot@example.com", okPassword, nil},
		{"EmailKoreanWithHanja", "홍길동洪@예시.한국", okPassword, nil},
		{"EmailHangulWithHiragana", "홍길동ひら@example.com", okPassword, []string{"email"}},
		{"EmailLatinWithJapanese", "taro山田たろう@example.jp", okPassword, nil},
		{"EmailArmenianAddress", "\u0576\u0561\u0574\u0561\u056f@example.am", okPassword, nil},
		{"EmailDevanagariAddress", "मनोज@उदाहरण.भारत", okPassword, nil},

		{"PasswordBlank", "ada@example.com", "", []string{"password"}},
		{"Password7Chars", "ada@example.com", "1234567", []string{"password"}},
		{"Password8Chars", "ada@example.com", "12345678", nil},
		{"Password7MultiByteChars14Bytes", "ada@example.com", "ééééééé", []string{"password"}},
		{"Password8MultiByteChars16Bytes", "ada@example.com", "éééééééé", nil},
		{"Password8Spaces", "ada@example.com", "        ", []string{"password"}},
		{"PasswordOnlyUnicodeSpaces", "ada@example.com", strings.Repeat("\u3000", 8), []string{"password"}},
		{"PasswordSpacesAround", "ada@example.com", "  pass word  ", nil},
		{"Password1024Bytes", "ada@example.com", strings.Repeat("a", 1024), nil},
		{"Password1024BytesMultiByte", "ada@example.com", strings.Repeat("é", 512), nil},
		{"Password1025Bytes", "ada@example.com", strings.Repeat("a", 1025), []string{"password"}},
		{"Password1025BytesMultiByte", "ada@example.com", "a" + strings.Repeat("é", 512), []string{"password"}},
		{"PasswordInvalidUTF8", "ada@example.com", "abcdefgh\xff", []string{"password"}},

		{"BothInvalid", "nobody", "short", []string{"email", "password"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Registration{Email: tt.email, Password: tt.password}
			err := r.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate(%q, %d-byte password) = %v, want nil", tt.email, len(tt.password), err)
				}
				return
			}
			if got := violationFields(t, err); !slices.Equal(got, tt.want) {
				t.Errorf("Validate(%q, %d-byte password) fields = %q, want %q", tt.email, len(tt.password), got, tt.want)
			}
		})
	}
}

func TestRegistrationNormalize(t *testing.T) {
	r := Registration{Email: " \t Ada@Example.com\n ", Password: "  spaces are kept  "}
	r.Normalize()
	if got, want := r.Email, "Ada@Example.com"; got != want {
		t.Errorf("Email = %q, want %q", got, want)
	}
	if got, want := r.Password, "  spaces are kept  "; got != want {
		t.Errorf("Password = %q, want %q", got, want)
	}
	if err := r.Validate(); err != nil {
		t.Errorf("Validate() after Normalize = %v, want nil", err)
	}
}

func TestUserHasRole(t *testing.T) {
	u := &User{Roles: []string{"ROLE_ADMIN", RoleUser}}
	if got, want := u.HasRole(RoleUser), true; got != want {
		t.Errorf("HasRole(%q) = %v, want %v", RoleUser, got, want)
	}
	if got, want := u.HasRole("ROLE_NOPE"), false; got != want {
		t.Errorf("HasRole(ROLE_NOPE) = %v, want %v", got, want)
	}
	if got, want := (&User{}).HasRole(RoleUser), false; got != want {
		t.Errorf("HasRole on no roles = %v, want %v", got, want)
	}
}
