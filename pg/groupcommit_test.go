package pg_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"herald/model"
	"herald/pg"
	"herald/pg/pgtest"
	"herald/storetest"
)

// cutProxy passes a PostgreSQL connection on between a Unix socket of its
// own and the server's. Once armed with a command tag, the first time the
// server completes a statement with that tag, it passes the completion on,
// lets the server finish (its ReadyForQuery comes after the commit) and
// cuts the connection before passing that on: the statement committed,
// and the client never hears so.
type cutProxy struct {
	dir, target string
	arm         atomic.Pointer[string]
	cuts        atomic.Int32
}

func startCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	p := &cutProxy{dir: t.TempDir(), target: target}
	listenAsPostgres(t, p.dir, p.serve)
	return p
}

// serverSocket is the socket of the test database url (its host=DIR), for
// a proxy to dial; at returns url with another directory in DIR's place,
// to reach the proxy instead.
func serverSocket(t *testing.T, url string) (socket string, at func(dir string) string) {
	t.Helper()
	i := strings.Index(url, "host=")
	if i < 0 {
		t.Fatalf("no host= in %s", url)
	}
	i += len("host=")
	j := strings.IndexByte(url[i:], '&')
	if j < 0 {
		j = len(url) - i
	}
	return filepath.Join(url[i:i+j], ".s.PGSQL.5432"), func(dir string) string { return url[:i] + dir + url[i+j:] }
}

// listenAsPostgres accepts connections on PostgreSQL's socket in dir, as
// a URL with host=dir reaches it, each served by serve, until the test
// ends.
func listenAsPostgres(t *testing.T, dir string, serve func(net.Conn)) {
	t.Helper()
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL.5432"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
}

func (p *cutProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("unix", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		_, _ = io.Copy(server, client)
		server.Close()
	}()
	cutting := false
	head := make([]byte, 5) // a message's type and length
	for {
		if _, err := io.ReadFull(server, head); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(head[1:])-4)
		if _, err := io.ReadFull(server, body); err != nil {
			return
		}
		if cutting {
			if head[0] == 'Z' {
				p.cuts.Add(1)
				return
			}
			continue
		}
		if _, err := client.Write(append(head[:5:5], body...)); err != nil {
			return
		}
		if tag := p.arm.Load(); tag != nil && head[0] == 'C' && strings.TrimRight(string(body), "\x00") == *tag {
			cutting = p.arm.CompareAndSwap(tag, nil)
		}
	}
}

// A batch of creates that committed, its answer lost with the connection,
// is not sent again one create at a time, which would store every message
// twice: each create gets the error, as one sent alone would, and it says
// the create's outcome is unknown.
func TestBatchLostAfterItsCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := cluster.Database(t)
	socket, at := serverSocket(t, url)
	p := startCutProxy(t, socket)
	// No poll of the log's head: its one row would answer the proxy's
	// watch for a statement's completion in the create's place.
	db := openURL(t, at(p.dir), pg.Options{PollEvery: time.Hour})
	u := &model.User{Email: "ada@example.com", PasswordHash: storetest.FakePasswordHash}
	if _, err := db.CreateUser(ctx, u, storetest.TokenHash("ada"), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	by := []model.Caller{model.ByUser(u.ID), model.ByUser(u.ID), model.ByUser(u.ID)}
	tag := "SELECT 3" // the batch statement's completion: a row per create
	p.arm.Store(&tag)
	msgs, errs := db.CommitBatch(by, []string{"one", "two", "three"})
	if p.cuts.Load() != 1 {
		t.Fatalf("the connection was cut %d times, want once", p.cuts.Load())
	}
	for k := range msgs {
		if errs[k] == nil {
			t.Errorf("create %d answered message %d, though its batch's outcome was lost", k, msgs[k].ID)
		} else if err := pg.Classify(errs[k]); !errors.Is(err, model.ErrOutcomeUnknown) {
			t.Errorf("create %d answered %v, want its outcome unknown", k, err)
		}
	}
	n, err := pgtest.QueryInt(ctx, url, "SELECT count(*) FROM messages")
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("3 creates stored %d messages", n)
	}
}

// A create alone that committed, its answer lost with the connection, is
// answered with its outcome unknown, not as the database out of reach,
// which would invite sending it again: the message is stored.
func TestCreateLostAfterItsCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := cluster.Database(t)
	socket, at := serverSocket(t, url)
	p := startCutProxy(t, socket)
	// No poll of the log's head: its one row would answer the proxy's
	// watch for a statement's completion in the create's place.
	db := openURL(t, at(p.dir), pg.Options{PollEvery: time.Hour})
	u := &model.User{Email: "ada@example.com", PasswordHash: storetest.FakePasswordHash}
	if _, err := db.CreateUser(ctx, u, storetest.TokenHash("ada"), time.Hour, nil); err != nil {
		t.Fatal(err)
	}
	tag := "SELECT 1" // the create statement's completion: one row
	p.arm.Store(&tag)
	m, err := db.CreateMessage(ctx, model.ByUser(u.ID), "one")
	if p.cuts.Load() != 1 {
		t.Fatalf("the connection was cut %d times, want once", p.cuts.Load())
	}
	if !errors.Is(err, model.ErrOutcomeUnknown) {
		t.Errorf("a create whose answer was lost after its commit = %v, %v; want its outcome unknown", m, err)
	}
	n, err := pgtest.QueryInt(ctx, url, "SELECT count(*) FROM messages")
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("the create stored %d messages, want 1", n)
	}
}
