package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/text/unicode/norm"
)

// TestStreamExactlyOnceOutside drives the real binary the way an outside
// suite would: three accounts write (create, edit, delete, and try to
// delete each other's messages) while six streams with different filters
// keep dropping their connections and resuming, alternately by header and
// by parameter, and the server is stopped twice under them, once with
// SIGTERM and once with SIGKILL. At the end the whole change log, read
// unfiltered from the start, shows every message as it is now, and every
// stream must have received what the contract promises of it: nothing
// twice, nothing out of order, and nothing lost (see checkOutsideReaders).
func TestStreamExactlyOnceOutside(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a real server twice under load")
	}
	dbPath := filepath.Join(t.TempDir(), "herald.db")
	run := &outsideRun{t: t, shared: make(map[uint64]string)}
	run.start(startProcessOn(t, dbPath))

	users := []string{"ada@example.com", "bob@example.com", "cy@example.com"}
	tokens := make([]string, len(users))
	for i, email := range users {
		tokens[i] = outsideRegister(t, run.base(), email)
	}

	filters := []string{
		"",
		"q=apple",
		"q=" + url.QueryEscape("CAFÉ river"), // NFC, upper case
		"q=" + url.QueryEscape("cafe\u0301"), // NFD
		"owner=" + url.QueryEscape("BOB@example.com"), // case-insensitive
		"q=apple&owner=ada%40example.com",
	}
	readers := make([]*outsideReader, len(filters))
	var readersWG sync.WaitGroup
	for i, f := range filters {
		readers[i] = &outsideReader{run: run, filter: f, token: tokens[0], rng: rand.New(rand.NewPCG(uint64(i), 11)), last: -1}
		readersWG.Add(1)
		go func() { defer readersWG.Done(); readers[i].follow() }()
	}
	for _, r := range readers { // every reader holds its starting position before anyone writes
		r.waitStarted(t)
	}

	writers := make([]*outsideWriter, len(users))
	var writersWG sync.WaitGroup
	for i := range users {
		writers[i] = &outsideWriter{run: run, token: tokens[i], rng: rand.New(rand.NewPCG(uint64(i), 29))}
		writersWG.Add(1)
		go func() { defer writersWG.Done(); writers[i].write() }()
	}

	time.Sleep(1500 * time.Millisecond)
	p := run.current()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitExit(t)
	run.start(startProcessOn(t, dbPath))

	time.Sleep(1500 * time.Millisecond)
	p = run.current()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	run.start(startProcessOn(t, dbPath))

	time.Sleep(1500 * time.Millisecond)
	run.stopWriting.Store(true)
	writersWG.Wait()

	log := outsideReplay(t, run.base(), tokens[0])
	if len(log) < 100 {
		t.Fatalf("only %d changes were made: the test proved little", len(log))
	}
	var refused int64
	for _, w := range writers {
		refused += w.refused.Load()
	}
	if refused == 0 {
		t.Error("no delete of another account's message was tried")
	}
	checkOutsideReaders(t, run, readers, &readersWG, filters, log)
	t.Logf("%d changes in the log, %d refused deletes of others' messages", len(log), refused)
}

// checkOutsideReaders waits until every reader has what it must have of
// log, the whole change log read unfiltered from the start, stops them,
// and fails t unless each got what the contract promises, over at least
// four connections. What a stream sends of a change depends on when: live,
// the change as it committed; resuming, the message as it is then, and
// nothing of a message deleted since. So rather than one list of events,
// what every stream must have got, whenever it connected:
//   - events in order, none twice (checked as they arrive);
//   - each at a position of the log, as the log has it, or, at a position
//     the log now skips, a creation or an update of a message since
//     deleted;
//   - the deletion of every message whose last event it got showed it
//     passing its filter;
//   - the newest change of every message that is left and that its
//     filter passes now, and, with no filter on words, every change the
//     log shows of the messages its owner filter passes.
func checkOutsideReaders(t *testing.T, run *outsideRun, readers []*outsideReader, readersWG *sync.WaitGroup, filters []string, log []outsideChange) {
	t.Helper()
	checks := make([]*outsideCheck, len(readers))
	for i, r := range readers {
		checks[i] = newOutsideCheck(t, log, filters[i])
		r.waitFor(t, checks[i])
	}
	run.stopReading.Store(true)
	for _, r := range readers {
		r.close()
	}
	readersWG.Wait()
	for i, r := range readers {
		r.mu.Lock()
		got, shown, resumes, err := slices.Clone(r.got), slices.Clone(r.shown), r.resumes, r.err
		r.mu.Unlock()
		if err != nil {
			t.Errorf("filter %q: %v", filters[i], err)
			continue
		}
		if len(checks[i].newest) == 0 {
			t.Errorf("filter %q: no message left passes it: the test proved little for it", filters[i])
		}
		for _, problem := range checks[i].problems(got, shown) {
			t.Errorf("filter %q: %s", filters[i], problem)
		}
		if resumes < 3 {
			t.Errorf("filter %q resumed only %d times", filters[i], resumes)
		}
		t.Logf("filter %q: %d events over %d connections", filters[i], len(got), resumes+1)
	}
}

// outsideRun is the server under test, which changes address on restart.
type outsideRun struct {
	t           *testing.T
	mu          sync.Mutex
	proc        *process
	stopWriting atomic.Bool
	stopReading atomic.Bool

	// pick, when set, chooses the server each request goes to, for a run
	// of several servers on one database.
	pick func() *process

	// Every writer's messages, so writers can try to delete each other's.
	sharedMu sync.Mutex
	shared   map[uint64]string // id → owner's token
}

func (r *outsideRun) start(p *process) {
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
}

func (r *outsideRun) current() *process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

func (r *outsideRun) base() string {
	if r.pick != nil {
		return "http://" + r.pick().addr
	}
	return "http://" + r.current().addr
}

func outsideRegister(t *testing.T, base, email string) string {
	t.Helper()
	body := fmt.Sprintf(`{"email":%q,"password":"outside test password"}`, email)
	res, err := http.Post(base+"/api/register", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct{ Token string }
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || out.Token == "" {
		t.Fatalf("register %s: %d %v", email, res.StatusCode, err)
	}
	return out.Token
}

// Words chosen so the filters above sometimes pass and sometimes do not,
// in every spelling the contract makes equal.
var outsideWords = []string{"apple", "Apple", "river", "café", "cafe\u0301", "CAFÉ", "stone", "cloud", "apples"}

func outsideContent(rng *rand.Rand) string {
	words := make([]string, 1+rng.IntN(4))
	for i := range words {
		words[i] = outsideWords[rng.IntN(len(outsideWords))]
	}
	return strings.Join(words, " ") + "."
}

// outsideWriter creates, edits and deletes its own messages, and now and
// then tries to delete someone else's, which must be refused.
type outsideWriter struct {
	run     *outsideRun
	token   string
	rng     *rand.Rand
	mine    []uint64
	refused atomic.Int64
}

func (w *outsideWriter) write() {
	hc := &http.Client{Timeout: 5 * time.Second}
	for !w.run.stopWriting.Load() {
		base := w.run.base()
		switch n := w.rng.IntN(20); {
		case n < 11 || len(w.mine) == 0:
			code, body, err := crashDo(hc, "POST", base+"/api/messages", w.token, outsideContent(w.rng))
			if err == nil && code == http.StatusCreated {
				var m struct{ ID uint64 }
				if json.Unmarshal(body, &m) == nil {
					w.mine = append(w.mine, m.ID)
					w.run.sharedMu.Lock()
					w.run.shared[m.ID] = w.token
					w.run.sharedMu.Unlock()
				}
			}
		case n < 16:
			id := w.mine[w.rng.IntN(len(w.mine))]
			code, _, err := crashDo(hc, "PATCH", fmt.Sprintf("%s/api/messages/%d", base, id), w.token, outsideContent(w.rng))
			if err == nil && code == http.StatusNotFound {
				w.forget(id) // deleted by a request whose answer a kill cut off
			}
		case n < 19:
			i := w.rng.IntN(len(w.mine))
			id := w.mine[i]
			code, _, err := crashDo(hc, "DELETE", fmt.Sprintf("%s/api/messages/%d", base, id), w.token, "")
			if err == nil && (code/100 == 2 || code == http.StatusNotFound) {
				w.forget(id)
			}
		default:
			var victim uint64
			w.run.sharedMu.Lock()
			for id, owner := range w.run.shared {
				if owner != w.token {
					victim = id
					break
				}
			}
			w.run.sharedMu.Unlock()
			if victim == 0 {
				continue
			}
			code, _, err := crashDo(hc, "DELETE", fmt.Sprintf("%s/api/messages/%d", base, victim), w.token, "")
			switch {
			case err != nil:
			case code == http.StatusForbidden || code == http.StatusNotFound:
				w.refused.Add(1)
			default:
				w.run.t.Errorf("deleting another account's message %d: status %d", victim, code)
			}
		}
		time.Sleep(time.Duration(w.rng.IntN(3)) * time.Millisecond)
	}
}

func (w *outsideWriter) forget(id uint64) {
	w.mine = slices.DeleteFunc(w.mine, func(x uint64) bool { return x == id })
	w.run.sharedMu.Lock()
	delete(w.run.shared, id)
	w.run.sharedMu.Unlock()
}

// outsideEvent is one change as a stream shows it.
type outsideEvent struct {
	id, name, data string
}

// outsideReader follows one filtered stream, dropping the connection at
// random and resuming from the last id it saw.
type outsideReader struct {
	run    *outsideRun
	filter string
	token  string
	rng    *rand.Rand

	mu      sync.Mutex
	got     []string // "id name msgID", in arrival order
	shown   []string // the content and the owner's e-mail each of got shows, "\x00"-joined
	last    int64    // last id seen (the opening block's included); -1 before the first
	resumes int
	err     error
	body    interface{ Close() error }
}

func (r *outsideReader) fail(format string, args ...any) {
	r.mu.Lock()
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
	r.mu.Unlock()
}

func (r *outsideReader) follow() {
	hc := &http.Client{}
	for attempt := 0; !r.run.stopReading.Load(); attempt++ {
		r.mu.Lock()
		last := r.last
		r.mu.Unlock()
		u := r.run.base() + "/api/messages/stream?" + r.filter
		req, _ := http.NewRequest("GET", u, nil)
		if last >= 0 {
			if attempt%2 == 0 {
				req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
			} else {
				sep := "&"
				if r.filter == "" {
					sep = ""
				}
				req.URL.RawQuery = r.filter + sep + "lastEventId=" + strconv.FormatInt(last, 10)
			}
		}
		req.Header.Set("Authorization", "Bearer "+r.token)
		res, err := hc.Do(req)
		if err != nil { // the server is restarting
			time.Sleep(20 * time.Millisecond)
			continue
		}
		if res.StatusCode != http.StatusOK {
			res.Body.Close()
			if res.StatusCode == http.StatusServiceUnavailable || res.StatusCode == http.StatusTooManyRequests {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			r.fail("stream answered %d", res.StatusCode)
			return
		}
		r.mu.Lock()
		r.body = res.Body
		if last >= 0 {
			r.resumes++
		}
		r.mu.Unlock()
		r.read(bufio.NewScanner(res.Body), 1+r.rng.IntN(30))
		res.Body.Close()
	}
}

// read takes events until the connection ends or, after dropAfter events,
// drops it.
func (r *outsideReader) read(sc *bufio.Scanner, dropAfter int) {
	var ev outsideEvent
	events := 0
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				ev.id = value
			case "event":
				ev.name = value
			case "data":
				ev.data = value
			}
			continue
		}
		if ev.id != "" {
			id, err := strconv.ParseInt(ev.id, 10, 64)
			if err != nil {
				r.fail("bad id %q", ev.id)
				return
			}
			r.mu.Lock()
			if id <= r.last && ev.name != "" {
				r.mu.Unlock()
				r.fail("event %d after %d: repeated or out of order", id, r.last)
				return
			}
			r.last = id
			if ev.name != "" {
				var m struct {
					ID      uint64
					Content string
					User    struct{ Email string }
				}
				_ = json.Unmarshal([]byte(ev.data), &m)
				r.got = append(r.got, fmt.Sprintf("%d %s %d", id, ev.name, m.ID))
				r.shown = append(r.shown, m.Content+"\x00"+m.User.Email)
				events++
			}
			r.mu.Unlock()
			if ev.name == "reset" {
				r.fail("reset at %d: the log was not trimmed, so nothing should be", id)
				return
			}
		}
		ev = outsideEvent{}
		if events >= dropAfter {
			return
		}
	}
}

func (r *outsideReader) close() {
	r.mu.Lock()
	if r.body != nil {
		r.body.Close()
	}
	r.mu.Unlock()
}

func (r *outsideReader) waitStarted(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		last, err := r.last, r.err
		r.mu.Unlock()
		if err != nil {
			t.Fatalf("filter %q: %v", r.filter, err)
		}
		if last >= 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("filter %q: no opening block within 10 s", r.filter)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFor waits, bounded, until the reader has received every event check
// says it must (or failed).
func (r *outsideReader) waitFor(t *testing.T, check *outsideCheck) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		got, shown, err := slices.Clone(r.got), slices.Clone(r.shown), r.err
		r.mu.Unlock()
		if err != nil || len(check.missing(got, shown)) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outsideChange is one entry of the change log, as read unfiltered.
type outsideChange struct {
	id      string
	name    string
	msgID   uint64
	content string
	owner   string
}

// outsideReplay reads the whole change log from the start, unfiltered.
func outsideReplay(t *testing.T, base, token string) []outsideChange {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/messages/stream?lastEventId=0", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("replay: %v %v", res, err)
	}
	defer res.Body.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var log []outsideChange
	var ev outsideChange
	for {
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("the stream ended during the replay")
			}
			line = l
		case <-time.After(time.Second):
			return log // caught up: nothing is being written
		}
		field, value, _ := strings.Cut(line, ": ")
		switch field {
		case "id":
			ev.id = value
		case "event":
			ev.name = value
		case "data":
			var m struct {
				ID      uint64
				Content string
				User    struct{ Email string }
			}
			if err := json.Unmarshal([]byte(value), &m); err != nil {
				t.Fatalf("replay: %v in %q", err, value)
			}
			ev.msgID, ev.content, ev.owner = m.ID, m.Content, m.User.Email
		case "":
			if ev.name != "" {
				log = append(log, ev)
			}
			ev = outsideChange{}
		}
	}
}

// outsideCheck is what a stream with a filter must have received of the
// whole log, worked out independently of the server's own matcher.
type outsideCheck struct {
	t        *testing.T
	matches  func(content, owner string) bool // whether the filter passes a message
	byPos    map[string]outsideChange         // the log by position
	deletion map[uint64]string                // message ID → the position of its deletion
	// newest are the positions of the newest changes of the messages left
	// that the filter passes now; every are the positions a filter by
	// owner alone passes.
	newest, every []string
}

func newOutsideCheck(t *testing.T, log []outsideChange, filter string) *outsideCheck {
	t.Helper()
	params, err := url.ParseQuery(filter)
	if err != nil {
		t.Fatal(err)
	}
	wantWords := outsideTerms(params.Get("q"))
	wantOwner := strings.ToLower(params.Get("owner"))
	matches := func(content, owner string) bool {
		if wantOwner != "" && strings.ToLower(owner) != wantOwner {
			return false
		}
		have := outsideTerms(content)
		for w := range wantWords {
			if _, ok := have[w]; !ok {
				return false
			}
		}
		return true
	}
	c := &outsideCheck{t: t, matches: matches, byPos: make(map[string]outsideChange), deletion: make(map[uint64]string)}
	type state struct {
		pos            string
		content, owner string
	}
	msgs := make(map[uint64]state)
	for _, ch := range log {
		c.byPos[ch.id] = ch
		switch ch.name {
		case "message.created", "message.updated":
			_, existed := msgs[ch.msgID]
			if (ch.name == "message.created") == existed {
				t.Fatalf("change %s: %s of message %d, which the log shows existing %v", ch.id, ch.name, ch.msgID, existed)
			}
			msgs[ch.msgID] = state{ch.id, ch.content, ch.owner}
		case "message.deleted":
			// A message the log shows nothing else of was deleted before
			// the log showed it: the log never shows a message since gone.
			delete(msgs, ch.msgID)
			c.deletion[ch.msgID] = ch.id
		default:
			t.Fatalf("change %s: unknown event %q", ch.id, ch.name)
		}
		if len(wantWords) == 0 && (wantOwner == "" || wantOwner == strings.ToLower(ch.owner) || ch.name == "message.deleted" && ownerOf(log, ch.msgID) == wantOwner) {
			c.every = append(c.every, ch.id)
		}
	}
	for _, m := range msgs {
		if matches(m.content, m.owner) {
			c.newest = append(c.newest, m.pos)
		}
	}
	return c
}

// ownerOf is the owner the log shows of message id, lower case; "" when it
// shows none (the message was deleted before the log showed it, and its
// deletion carries no owner).
func ownerOf(log []outsideChange, id uint64) string {
	for _, ch := range log {
		if ch.msgID == id && ch.owner != "" {
			return strings.ToLower(ch.owner)
		}
	}
	return ""
}

// missing returns the positions a stream that received got, showing
// shown, must have and lacks.
func (c *outsideCheck) missing(got, shown []string) []string {
	have := make(map[string]bool, len(got))
	passing := make(map[uint64]bool) // whether the last event of each message got showed it passing
	for i, g := range got {
		pos, name, id := outsideParse(c.t, g)
		have[pos] = true
		if name != "message.deleted" {
			content, owner, _ := strings.Cut(shown[i], "\x00")
			passing[id] = c.matches(content, owner)
		}
	}
	var out []string
	for _, pos := range slices.Concat(c.newest, c.every) {
		if !have[pos] {
			out = append(out, "newest "+pos)
		}
	}
	for id, passed := range passing {
		if pos, deleted := c.deletion[id]; passed && deleted && !have[pos] {
			out = append(out, "deletion "+pos)
		}
	}
	return out
}

// problems says how got, what a stream received showing shown, breaks the
// contract.
func (c *outsideCheck) problems(got, shown []string) []string {
	var out []string
	for _, g := range got {
		pos, name, id := outsideParse(c.t, g)
		ch, logged := c.byPos[pos]
		_, deleted := c.deletion[id]
		switch {
		case logged && (ch.name != name || ch.msgID != id):
			out = append(out, fmt.Sprintf("event %s is %s of message %d; the log has %s of message %d there", pos, name, id, ch.name, ch.msgID))
		case !logged && (name == "message.deleted" || !deleted):
			out = append(out, fmt.Sprintf("event %s (%s of message %d) is at a position the log skips, which only the change of a message since deleted may be", pos, name, id))
		}
	}
	if missing := c.missing(got, shown); len(missing) > 0 {
		out = append(out, fmt.Sprintf("lost: %v", missing))
	}
	return out
}

// outsideParse splits a reader's record of an event: position, name and
// message ID.
func outsideParse(t *testing.T, got string) (pos, name string, id uint64) {
	f := strings.Fields(got)
	if len(f) != 3 {
		t.Fatalf("event record %q", got)
	}
	id, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil {
		t.Fatalf("event record %q: %v", got, err)
	}
	return f[0], f[1], id
}

// outsideTerms splits text into words the contract's way, for the few
// scripts this test writes: letters, digits and combining marks make
// words; NFC; lower case.
func outsideTerms(text string) map[string]struct{} {
	words := make(map[string]struct{})
	for _, w := range strings.FieldsFunc(norm.NFC.String(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == 'é' || r == 'É' || r == '\u0301')
	}) {
		words[strings.ToLower(w)] = struct{}{}
	}
	return words
}
