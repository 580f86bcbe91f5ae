package http_test

import (
	"fmt"
	"testing"

	"herald/auth"
	"herald/http/internal/apitest"
)

// mintCode is a well-formed code no store holds, so that a guess reaches
// the store's lookup rather than stopping at the checksum.
func mintCode(t *testing.T, prefix string) string {
	t.Helper()
	code, _, err := auth.MintCode(prefix)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// messagePath is the URL path of message id.
func messagePath(id uint64) string { return fmt.Sprintf("/api/messages/%d", id) }

// pw is the password of every account these tests make, and of those
// apitest makes for them.
const pw = apitest.Password
