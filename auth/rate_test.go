package auth

import (
	"testing"
	"time"
)

// TestParseRate: what the flags and the settings accept, and that String
// writes what ParseRate reads back.
func TestParseRate(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Rate
		ok   bool
	}{
		{"10/5m", Rate{10, 5 * time.Minute}, true},
		{"60/5s", Rate{60, 5 * time.Second}, true},
		{"1/1h30m", Rate{1, 90 * time.Minute}, true},
		{"1/500ms", Rate{1, 500 * time.Millisecond}, true},
		{"0/5m", Rate{}, false},
		{"-1/5m", Rate{}, false},
		{"10/0s", Rate{}, false},
		{"10/-5m", Rate{}, false},
		{"10", Rate{}, false},
		{"10/", Rate{}, false},
		{"/5m", Rate{}, false},
		{"ten/5m", Rate{}, false},
		{"10/5 minutes", Rate{}, false},
		{"", Rate{}, false},
	} {
		got, err := ParseRate(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v, ok %v", tt.in, got, err, tt.want, tt.ok)
			continue
		}
		if tt.ok {
			if again, err := ParseRate(got.String()); err != nil || again != got {
				t.Errorf("ParseRate(%q.String() = %q) = %v, %v", tt.in, got.String(), again, err)
			}
		}
	}
	if got, want := (Rate{60, 5 * time.Minute}).String(), "60/5m"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if got, want := (Rate{3, 720 * time.Hour}).String(), "3/720h"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}
