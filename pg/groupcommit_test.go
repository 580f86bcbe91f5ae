package pg_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"reflect"
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

// TestCreateBatch: creates written as one group commit are each checked on
// their own — a working token, one revoked, one expired, an account by
// ID, an unknown one — and those that pass get consecutive IDs and
// positions in the order given, with one change each.
func TestCreateBatch(t *testing.T) {
	clock := storetest.NewClock()
	db, _ := open(t, pg.Options{Now: clock.Now})
	ctx := context.Background()
	users := make([]*model.User, 3)
	for i := range users {
		users[i] = &model.User{Email: fmt.Sprintf("u%d@example.com", i), PasswordHash: storetest.FakePasswordHash}
		ttl := time.Hour
		if i == 2 {
			ttl = time.Minute
		}
		if _, err := db.CreateUser(ctx, users[i], storetest.TokenHash(fmt.Sprint("u", i)), ttl, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.RevokeToken(ctx, storetest.TokenHash("u1")); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Minute) // u2's token has expired
	head, _, _ := db.ChangeHead(ctx)
	by := []model.Caller{
		model.ByToken(storetest.TokenHash("u0")),
		model.ByToken(storetest.TokenHash("u1")),
		model.ByUser(users[1].ID),
		model.ByToken(storetest.TokenHash("u2")),
		model.ByUser(999),
		model.ByToken(storetest.TokenHash("u0")),
		model.ByToken(storetest.TokenHash("never")),
	}
	contents := []string{"first words", "revoked", "by account", "expired", "nobody", "second NFC café", "unknown"}
	msgs, errs, err := db.CreateBatch(ctx, by, contents)
	if err != nil {
		t.Fatal(err)
	}
	wantErr := []error{nil, model.ErrUnauthorized, nil, model.ErrUnauthorized, model.ErrNotFound, nil, model.ErrUnauthorized}
	var created []*model.Message
	for i := range by {
		if !errors.Is(errs[i], wantErr[i]) || (wantErr[i] == nil && errs[i] != nil) {
			t.Errorf("create %d (%q): %v, want %v", i, contents[i], errs[i], wantErr[i])
		}
		if errs[i] == nil {
			created = append(created, msgs[i])
		}
	}
	if len(created) != 3 {
		t.Fatalf("%d created, want 3", len(created))
	}
	for i, m := range created {
		if i > 0 && m.ID != created[i-1].ID+1 {
			t.Errorf("IDs %d then %d: not consecutive", created[i-1].ID, m.ID)
		}
		if _, got, err := db.Message(ctx, model.ByServer(), m.ID); err != nil || !reflect.DeepEqual(*got, *m) {
			t.Errorf("message %d as stored: %+v, %v; created %+v", m.ID, got, err, m)
		}
	}
	chs, now, err := db.ChangesAfter(ctx, head, 100)
	if err != nil || len(chs) != 3 || now != head+3 {
		t.Fatalf("changes after the batch: %d, head %d, %v", len(chs), now, err)
	}
	for i, ch := range chs {
		if !reflect.DeepEqual(ch.Message, *created[i]) || ch.Seq != head+uint64(i)+1 {
			t.Errorf("change %d: %s, want the creation of %+v", ch.Seq, storetest.ChangeString(ch), created[i])
		}
	}
	_, page, err := db.SearchMessages(ctx, model.ByServer(), model.SearchQuery{Terms: model.Terms("CAFE\u0301 second")})
	if err != nil || len(page.Messages) != 1 || page.Messages[0].ID != created[2].ID {
		t.Errorf("search for the batch's words: %v, %v", page, err)
	}
}
