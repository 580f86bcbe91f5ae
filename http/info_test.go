package http_test

import (
	"testing"

	"herald/auth"
	heraldhttp "herald/http"
	"herald/http/internal/apitest"
)

func TestInfo(t *testing.T) {
	for _, mode := range []heraldhttp.Registration{heraldhttp.RegistrationOpen, heraldhttp.RegistrationInvite, heraldhttp.RegistrationClosed} {
		e := apitest.New(t, apitest.WithRegistration(mode), func(c *heraldhttp.Config) { c.Version = "9.9.9 (abc, go, linux/amd64)" })
		e.MakeFirstAdmin("root@example.com")
		root := e.Login("root@example.com", pw)
		if got := e.Do(apitest.Request{Method: "GET", Path: "/api/info"}).JSON(t); got["registration"] != string(mode) || got["version"] != nil {
			t.Errorf("%s: anonymous info = %v, want the mode and no version", mode, got)
		}
		if got := e.Do(apitest.Request{Method: "GET", Path: "/api/info", Token: root}).JSON(t); got["version"] != "9.9.9 (abc, go, linux/amd64)" {
			t.Errorf("%s: an administrator's info = %v, want the version", mode, got)
		}
	}
	e := apitest.New(t)
	user := e.Register("ada@example.com", pw)
	for _, token := range []string{user, "herald_not-a-token", mintCode(t, auth.TokenPrefix)} {
		if got := e.Do(apitest.Request{Method: "GET", Path: "/api/info", Token: token}).JSON(t); got["version"] != nil || got["registration"] != "open" {
			t.Errorf("info with token %.12s… = %v, want the public answer", token, got)
		}
	}
}
