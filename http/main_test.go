package http_test

import (
	"os"
	"testing"

	"herald/http/internal/apitest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	apitest.StopPostgres()
	os.Exit(code)
}
