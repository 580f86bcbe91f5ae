package model

import (
	"errors"
	"testing"
)

// violationFields asserts err is a *ValidationError matching ErrInvalid and
// returns the fields it names, in order.
func violationFields(tb testing.TB, err error) []string {
	tb.Helper()
	if !errors.Is(err, ErrInvalid) {
		tb.Fatalf("err = %v, want ErrInvalid", err)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		tb.Fatalf("err = %T %v, want *ValidationError", err, err)
	}
	fields := make([]string, len(ve.Violations))
	for i, v := range ve.Violations {
		fields[i] = v.Field
		if v.Message == "" {
			tb.Errorf("violation of %q has an empty message", v.Field)
		}
	}
	return fields
}
