package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRetryAfterKill: a create whose answer its client never read,
// because the server was killed (SIGKILL) once it had committed the
// create, is sent again with its Idempotency-Key: on bbolt to the server
// restarted on the file, on PostgreSQL to another instance on the
// database. The retry gets the first answer, a second retry the same one
// to the byte, and the message exists once.
func TestRetryAfterKill(t *testing.T) {
	for _, tt := range []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"bbolt", func(t *testing.T) string { return filepath.Join(t.TempDir(), "herald.db") }},
		{"postgres", func(t *testing.T) string { return postgresCluster(t).Database(t) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := tt.db(t)
			killed := startProcessOn(t, db)
			var other *process
			if tt.name == "postgres" {
				other = startProcessOn(t, db)
			}
			token := outsideRegister(t, "http://"+killed.addr, "ada@example.com")
			const content = "sent once, answer lost"
			body := fmt.Sprintf(`{"content":%q}`, content)

			// The create goes out on a connection nobody reads; the
			// server is killed once its access log shows the create
			// answered, so committed.
			conn, err := net.Dial("tcp", killed.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			fmt.Fprintf(conn, "POST /api/messages HTTP/1.1\r\nHost: herald\r\nAuthorization: Bearer %s\r\n"+
				"Content-Type: application/json\r\nIdempotency-Key: \"lost-1\"\r\nContent-Length: %d\r\n\r\n%s", token, len(body), body)
			killed.waitLog(t, "msg=request method=POST path=/api/messages status=201")
			if err := killed.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-killed.exited
			if other == nil {
				other = startProcessOn(t, db)
			}
			base := "http://" + other.addr

			retry := func() (*http.Response, []byte) {
				t.Helper()
				req, err := http.NewRequest("POST", base+"/api/messages", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", `"lost-1"`)
				res, err := newClient(t).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, err := io.ReadAll(res.Body)
				if err != nil {
					t.Fatal(err)
				}
				return res, b
			}
			res, first := retry()
			if res.StatusCode != http.StatusCreated {
				t.Fatalf("the retry: %d %s, want 201", res.StatusCode, first)
			}
			var created messageResponse
			location := res.Header.Get("Location")
			if err := json.Unmarshal(first, &created); err != nil || location != fmt.Sprintf("/api/messages/%d", created.ID) {
				t.Fatalf("the retry's answer: Location %q, body %s (%v)", location, first, err)
			}
			res2, second := retry()
			if res2.StatusCode != res.StatusCode || !bytes.Equal(second, first) || res2.Header.Get("Location") != location ||
				res2.Header.Get("ETag") != res.Header.Get("ETag") {
				t.Errorf("a second retry: %d %s %q, want %d %s %q", res2.StatusCode, second, res2.Header.Get("Location"), res.StatusCode, first, location)
			}

			// The message the killed server made, once: the one the
			// retries answered with.
			var found struct{ Items []messageResponse }
			callStatus(t, newClient(t), "GET", base+"/api/messages?q="+url.QueryEscape(content), token, nil, http.StatusOK, &found)
			if len(found.Items) != 1 || found.Items[0].ID != created.ID {
				t.Errorf("messages with the content: %+v, want message %d alone", found.Items, created.ID)
			}

			// What reached the dead connection before the kill, if the
			// server had sent it (it had, in every run seen), is the
			// answer the retries gave.
			_ = conn.SetReadDeadline(time.Now().Add(time.Second))
			if lost, _ := io.ReadAll(conn); len(lost) > 0 {
				res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(lost)), nil)
				if err != nil {
					t.Fatalf("the answer the kill cut off does not parse: %v\n%s", err, lost)
				}
				b, err := io.ReadAll(res.Body)
				if err != nil || res.StatusCode != http.StatusCreated || !bytes.Equal(b, first) || res.Header.Get("Location") != location ||
					res.Header.Get("ETag") != res2.Header.Get("ETag") {
					t.Errorf("the answer the kill cut off:\n%s\nwant the retry's: %d %q %s", lost, http.StatusCreated, location, first)
				}
			}
		})
	}
}
