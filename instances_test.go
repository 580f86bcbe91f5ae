package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Herald as more than one machine: separate herald processes on one
// PostgreSQL database behave as one service.

// sseStream is a live stream read in the background: its events, and
// whether it has ended.
type sseStream struct {
	events chan sseEvent
	ended  chan struct{}
	res    *http.Response
}

type sseEvent struct {
	id         uint64
	name, data string
}

// openStream opens GET /api/messages/stream on base, resuming after last
// when last >= 0, and fails t unless it answers 200.
func openStream(t *testing.T, base, token string, last int64) *sseStream {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/api/messages/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if last >= 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		res.Body.Close()
		t.Fatalf("stream on %s: status %d", base, res.StatusCode)
	}
	s := &sseStream{events: make(chan sseEvent, 1000), ended: make(chan struct{}), res: res}
	t.Cleanup(func() { res.Body.Close() })
	go func() {
		defer close(s.ended)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		var ev sseEvent
		for sc.Scan() {
			field, value, _ := strings.Cut(sc.Text(), ": ")
			switch field {
			case "id":
				ev.id, _ = strconv.ParseUint(value, 10, 64)
			case "event":
				ev.name = value
			case "data":
				ev.data = value
			case "":
				if ev.name != "" {
					s.events <- ev
				}
				ev = sseEvent{}
			}
		}
	}()
	return s
}

// take reads n events, failing t if they do not come within a while.
func (s *sseStream) take(t *testing.T, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	timeout := time.After(20 * time.Second)
	for len(out) < n {
		select {
		case ev := <-s.events:
			out = append(out, ev)
		case <-timeout:
			t.Fatalf("%d of %d events within 20s", len(out), n)
		}
	}
	return out
}

// postMessages creates n messages through base and returns their IDs.
func postMessages(t *testing.T, base, token string, n int, prefix string) []uint64 {
	t.Helper()
	c := newClient(t)
	var ids []uint64
	for i := range n {
		var m messageResponse
		callStatus(t, c, "POST", base+"/api/messages", token, map[string]string{"content": fmt.Sprintf("%s %d", prefix, i)}, http.StatusCreated, &m)
		ids = append(ids, m.ID)
	}
	return ids
}

func eventMessageIDs(evs []sseEvent) []uint64 {
	var ids []uint64
	for _, ev := range evs {
		var m messageResponse
		_ = json.Unmarshal([]byte(ev.data), &m)
		ids = append(ids, m.ID)
	}
	return ids
}

// TestTwoInstances: post through one instance, stream from the other;
// kill the streaming one mid-stream; resume on the first with
// Last-Event-ID and get exactly what came after, nothing twice; and a
// logout through one ends the account's streams on the other.
func TestTwoInstances(t *testing.T) {
	db := postgresCluster(t).Database(t)
	a := startProcessOn(t, db)
	b := startProcessOn(t, db)
	baseA, baseB := "http://"+a.addr, "http://"+b.addr
	token := outsideRegister(t, baseA, "ada@example.com")

	onB := openStream(t, baseB, token, -1)
	first := postMessages(t, baseA, token, 5, "first")
	got := onB.take(t, 5)
	if ids := eventMessageIDs(got); !slices.Equal(ids, first) {
		t.Fatalf("b streamed %v, want the messages posted through a, %v", ids, first)
	}
	for i, ev := range got {
		if ev.name != "message.created" || (i > 0 && ev.id != got[i-1].id+1) {
			t.Fatalf("event %d: %+v; want consecutive message.created", i, ev)
		}
	}
	last := got[len(got)-1].id

	// b dies mid-stream, without a word.
	if err := b.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-b.exited
	select {
	case <-onB.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream on the killed instance did not end")
	}
	second := postMessages(t, baseA, token, 5, "second")
	onA := openStream(t, baseA, token, int64(last))
	resumed := onA.take(t, 5)
	if ids := eventMessageIDs(resumed); !slices.Equal(ids, second) {
		t.Errorf("resumed on a: %v, want %v", ids, second)
	}
	if resumed[0].id != last+1 {
		t.Errorf("resumed at %d, want %d: something lost or repeated", resumed[0].id, last+1)
	}
	select {
	case ev := <-onA.events:
		t.Errorf("an event beyond what was posted: %+v", ev)
	case <-time.After(300 * time.Millisecond):
	}

	// A revocation through a ends the token's streams on c, another
	// instance.
	c := startProcessOn(t, db)
	second2 := outsideLogin(t, baseA, "ada@example.com")
	onC := openStream(t, "http://"+c.addr, second2, -1)
	cl := newClient(t)
	callStatus(t, cl, "POST", baseA+"/api/logout", second2, nil, http.StatusNoContent, nil)
	select {
	case <-onC.ended:
	case <-time.After(15 * time.Second):
		t.Error("a token logged out through a still streams on c")
	}

	// An administrator's suspension through a ends the account's streams
	// on c too.
	if code, out, errOut := runWithInput(t, "outside test password\n", "admin", "create", "--db", db, "root@example.com"); code != 0 {
		t.Fatalf("herald admin create = %d, %q, %q", code, out, errOut)
	}
	root := outsideLogin(t, baseA, "root@example.com")
	bob := outsideRegister(t, baseA, "bob@example.com")
	onC = openStream(t, "http://"+c.addr, bob, -1)
	var me struct{ ID uint64 }
	callStatus(t, cl, "GET", baseA+"/api/me", bob, nil, http.StatusOK, &me)
	callStatus(t, cl, "PATCH", baseA+"/api/admin/users/"+strconv.FormatUint(me.ID, 10), root, map[string]any{"suspended": true}, http.StatusOK, nil)
	select {
	case <-onC.ended:
	case <-time.After(15 * time.Second):
		t.Error("an account suspended through a still streams on c")
	}
}

// TestInstancesShareLimits: instances on one database count one budget
// per key, not one each: registrations per address, writes per account
// and failed logins per account.
func TestInstancesShareLimits(t *testing.T) {
	url := postgresCluster(t).Database(t)
	vars := map[string]string{"HERALD_ADDR": "127.0.0.1:0", "HERALD_DB": url, "HERALD_HASH_CONCURRENCY": "2",
		"HERALD_REGISTRATIONS_PER_ADDRESS": "3/1h", "HERALD_WRITES_PER_ACCOUNT": "4/1h", "HERALD_LOGIN_FAILURES_PER_ACCOUNT": "2/1h"}
	a, b := startListening(t, nil, vars), startListening(t, nil, vars)
	bases := []string{"http://" + a.addr, "http://" + b.addr}
	c := newClient(t)
	var tokens []string
	for i := range 3 {
		var reg tokenResponse
		callStatus(t, c, "POST", bases[i%2]+"/api/register", "", map[string]string{"email": fmt.Sprintf("u%d@example.com", i), "password": "outside test password"}, http.StatusCreated, &reg)
		tokens = append(tokens, reg.Token)
	}
	for _, base := range bases {
		res, body := call(t, c, "POST", base+"/api/register", "", map[string]string{"email": "late@" + base[7:16] + ".example.com", "password": "outside test password"})
		if res.StatusCode != http.StatusTooManyRequests {
			t.Errorf("a fourth registration from one address through %s: %d %s, want 429", base, res.StatusCode, body)
		}
	}
	for i := range 4 {
		callStatus(t, c, "POST", bases[i%2]+"/api/messages", tokens[0], map[string]string{"content": fmt.Sprint("write ", i)}, http.StatusCreated, nil)
	}
	for _, base := range bases {
		res, body := call(t, c, "POST", base+"/api/messages", tokens[0], map[string]string{"content": "one too many"})
		if res.StatusCode != http.StatusTooManyRequests {
			t.Errorf("a fifth write of one account through %s: %d %s, want 429", base, res.StatusCode, body)
		}
	}
	callStatus(t, c, "POST", bases[1]+"/api/messages", tokens[1], map[string]string{"content": "another account's budget"}, http.StatusCreated, nil)
	wrong := map[string]string{"username": "u2@example.com", "password": "not the password"}
	for _, base := range bases {
		callStatus(t, c, "POST", base+"/api/login", "", wrong, http.StatusUnauthorized, nil)
	}
	for _, base := range bases {
		if res, body := call(t, c, "POST", base+"/api/login", "", wrong); res.StatusCode != http.StatusTooManyRequests {
			t.Errorf("a third failed login of one account through %s: %d %s, want 429", base, res.StatusCode, body)
		}
	}
}

// TestInstancesFollowSettings: a settings change made through one
// instance on PostgreSQL is in force on another within seconds, without a
// restart; and an instance started afterwards, its flag saying open,
// takes the database's value.
func TestInstancesFollowSettings(t *testing.T) {
	db := postgresCluster(t).Database(t)
	a := startProcessOn(t, db)
	b := startProcessOn(t, db)
	baseA, baseB := "http://"+a.addr, "http://"+b.addr
	if code, out, errOut := runWithInput(t, "outside test password\n", "admin", "create", "--db", db, "root@example.com"); code != 0 {
		t.Fatalf("herald admin create = %d, %q, %q", code, out, errOut)
	}
	root := outsideLogin(t, baseA, "root@example.com")
	c := newClient(t)
	mode := func(base string) string {
		var info struct{ Registration string }
		callStatus(t, c, "GET", base+"/api/info", "", nil, http.StatusOK, &info)
		return info.Registration
	}
	if got := mode(baseB); got != "open" {
		t.Fatalf("b's registration before the change = %q, want open", got)
	}
	callStatus(t, c, "PATCH", baseA+"/api/admin/settings", root, map[string]string{"registration": "closed"}, http.StatusOK, nil)
	deadline := time.Now().Add(10 * time.Second)
	for mode(baseB) != "closed" {
		if time.Now().After(deadline) {
			t.Fatal("b still says registration is open 10 s after the change through a")
		}
		time.Sleep(50 * time.Millisecond)
	}
	callStatus(t, c, "POST", baseB+"/api/register", "", map[string]string{"email": "late@example.com", "password": "outside test password"}, http.StatusForbidden, nil)
	if got := mode("http://" + startProcessOn(t, db).addr); got != "closed" {
		t.Errorf("an instance started after the change says registration is %q, want the database's closed", got)
	}
}

func outsideLogin(t *testing.T, base, email string) string {
	t.Helper()
	var out struct{ Token string }
	callStatus(t, newClient(t), "POST", base+"/api/login", "", map[string]string{"username": email, "password": "outside test password"}, http.StatusOK, &out)
	return out.Token
}

// TestTwoInstancesOutside is TestStreamExactlyOnceOutside on two herald
// processes sharing one PostgreSQL database: writers and readers go to
// either at random, readers resume wherever their next connection lands,
// and each instance is killed (SIGKILL) once and replaced while they
// work. Every stream must receive exactly what its filter passes of the
// one log: nothing lost, nothing twice, in order.
func TestTwoInstancesOutside(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts real servers under load")
	}
	db := postgresCluster(t).Database(t)
	var mu sync.Mutex
	procs := []*process{startProcessOn(t, db), startProcessOn(t, db)}
	rng := rand.New(rand.NewPCG(3, 5))
	run := &outsideRun{t: t, shared: make(map[uint64]string)}
	run.pick = func() *process {
		mu.Lock()
		defer mu.Unlock()
		return procs[rng.IntN(len(procs))]
	}
	run.start(procs[0])

	users := []string{"ada@example.com", "bob@example.com", "cy@example.com"}
	tokens := make([]string, len(users))
	for i, email := range users {
		tokens[i] = outsideRegister(t, run.base(), email)
	}
	filters := []string{
		"",
		"q=apple",
		"q=" + url.QueryEscape("CAFÉ river"),
		"q=" + url.QueryEscape("cafe\u0301"),
		"owner=" + url.QueryEscape("BOB@example.com"),
		"q=apple&owner=ada%40example.com",
	}
	readers := make([]*outsideReader, len(filters))
	var readersWG sync.WaitGroup
	for i, f := range filters {
		readers[i] = &outsideReader{run: run, filter: f, token: tokens[0], rng: rand.New(rand.NewPCG(uint64(i), 17)), last: -1}
		readersWG.Go(readers[i].follow)
	}
	for _, r := range readers {
		r.waitStarted(t)
	}
	writers := make([]*outsideWriter, len(users))
	var writersWG sync.WaitGroup
	for i := range users {
		writers[i] = &outsideWriter{run: run, token: tokens[i], rng: rand.New(rand.NewPCG(uint64(i), 31))}
		writersWG.Go(writers[i].write)
	}
	for victim := range procs {
		time.Sleep(1500 * time.Millisecond)
		mu.Lock()
		p := procs[victim]
		mu.Unlock()
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-p.exited
		replacement := startProcessOn(t, db)
		mu.Lock()
		procs[victim] = replacement
		mu.Unlock()
		run.start(replacement)
	}
	time.Sleep(1500 * time.Millisecond)
	run.stopWriting.Store(true)
	writersWG.Wait()

	log := outsideReplay(t, run.base(), tokens[0])
	if len(log) < 100 {
		t.Fatalf("only %d changes were made: the test proved little", len(log))
	}
	checkOutsideReaders(t, run, readers, &readersWG, filters, log)
	t.Logf("%d changes in the log, written through two instances, each killed once", len(log))
}

// TestInstancesShareNotifications: bob mentions ada through one instance;
// ada's stream on another instance gets the notification, and only hers;
// a stream resumed on a third instance from before it gets it again; a
// name changed through one instance is shown by the others at once.
func TestInstancesShareNotifications(t *testing.T) {
	db := postgresCluster(t).Database(t)
	a, b, c := startProcessOn(t, db), startProcessOn(t, db), startProcessOn(t, db)
	baseA, baseB, baseC := "http://"+a.addr, "http://"+b.addr, "http://"+c.addr
	ada := outsideRegister(t, baseA, "ada@example.com")
	bob := outsideRegister(t, baseA, "bob@example.com")
	carol := outsideRegister(t, baseA, "carol@example.com")
	adaOnB := openStream(t, baseB, ada, -1)
	carolOnB := openStream(t, baseB, carol, -1)

	postMessages(t, baseA, bob, 1, "hello @ada,")
	var created, notification sseEvent
	for _, ev := range adaOnB.take(t, 2) {
		switch ev.name {
		case "message.created":
			created = ev
		case "notification":
			notification = ev
		}
	}
	var n struct {
		ID      uint64
		Kind    string
		Actor   struct{ Handle string }
		Message struct{ Content string }
	}
	if err := json.Unmarshal([]byte(notification.data), &n); err != nil || n.Kind != "mention" || n.Actor.Handle != "bob" ||
		n.Message.Content != "hello @ada, 0" || n.ID != notification.id {
		t.Fatalf("ada's stream on b: %+v then %+v (%v)", created, notification, err)
	}
	if ev := carolOnB.take(t, 1)[0]; ev.name != "message.created" {
		t.Errorf("carol's stream got %+v", ev)
	}
	select {
	case ev := <-carolOnB.events:
		t.Errorf("carol's stream got someone else's %+v", ev)
	case <-time.After(300 * time.Millisecond):
	}
	onC := openStream(t, baseC, ada, int64(created.id-1))
	if evs := onC.take(t, 2); evs[1].name != "notification" || evs[1].id != notification.id {
		t.Errorf("resumed on c: %+v", evs)
	}

	cl := newClient(t)
	for _, base := range []string{baseB, baseC} { // each instance reads, and may keep, bob's name
		callStatus(t, cl, "GET", base+"/api/messages?owner=bob@example.com", ada, nil, http.StatusOK, nil)
	}
	callStatus(t, cl, "PATCH", baseA+"/api/me", bob, map[string]string{"name": "Bob Builder"}, http.StatusOK, nil)
	// The other instances forget the old name when PostgreSQL's
	// notification of the change reaches them: within moments, not in
	// the same instant.
	for _, base := range []string{baseB, baseC} {
		var page struct {
			Items []struct {
				User struct{ Name string }
			}
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			callStatus(t, cl, "GET", base+"/api/messages?owner=bob@example.com", ada, nil, http.StatusOK, &page)
			if len(page.Items) == 1 && page.Items[0].User.Name == "Bob Builder" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s still shows bob's message as %+v 5 s after he changed his name through a", base, page.Items)
				break
			}
		}
	}
}
