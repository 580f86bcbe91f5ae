package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCrashRecovery is the promise that an acknowledged write is never
// lost, tested the hard way: the real binary serves 32 concurrent clients
// creating, editing and deleting messages, is killed with SIGKILL at a
// random moment, and is restarted on the same file — five times. After
// every kill: `herald check` finds the file sound and every index in
// agreement with the records; every write that got a 2xx is there; every
// acknowledged delete is gone; every message holds an acknowledged
// version (or the one whose answer the kill cut off); and the restarted
// service answers.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("five SIGKILLs of a real server")
	}
	dbPath := filepath.Join(t.TempDir(), "herald.db")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	model := &crashModel{msgs: make(map[uint64]*crashMsg)}
	var token string
	for round := range 5 {
		p := startProcessOn(t, dbPath)
		base := "http://" + p.addr
		if round == 0 {
			token = crashRegister(t, base)
		} else {
			model.verify(t, base, token, round)
		}
		killAfter := time.Duration(200+rng.IntN(800)) * time.Millisecond
		var wg sync.WaitGroup
		for c := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				model.client(base, token, uint64(round*100+c), rand.New(rand.NewPCG(uint64(round), uint64(c))))
			}()
		}
		time.Sleep(killAfter)
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-p.exited
		wg.Wait()
		t.Logf("round %d: killed after %v; %d messages known, %d acknowledged writes so far", round, killAfter, len(model.msgs), model.acked)

		code, out, errOut := runArgs(t, "check", "--db", dbPath)
		if code != 0 {
			t.Fatalf("round %d: herald check after SIGKILL = %d:\n%s%s", round, code, out, errOut)
		}
	}
	p := startProcessOn(t, dbPath)
	model.verify(t, "http://"+p.addr, token, 5)
	if model.acked == 0 {
		t.Fatal("no write was acknowledged: the test proved nothing")
	}
}

// crashMsg is what the clients know of one message. Each message is only
// ever touched by the client that created it, one request at a time, so
// its last request decides what it must hold.
type crashMsg struct {
	acked    string // content of the last acknowledged create or edit
	deleted  bool   // a delete was acknowledged
	inFlight *crashOp
}

// crashOp is a request whose answer never came: the kill cut it off, so
// it may or may not have committed.
type crashOp struct {
	del     bool
	content string
}

type crashModel struct {
	mu    sync.Mutex
	msgs  map[uint64]*crashMsg
	acked int
}

// client runs writes until the server stops answering.
func (m *crashModel) client(base, token string, seed uint64, rng *rand.Rand) {
	hc := &http.Client{Timeout: 5 * time.Second}
	var mine []uint64
	for i := 0; ; i++ {
		switch op := rng.IntN(10); {
		case op < 5 || len(mine) == 0:
			content := fmt.Sprintf("client %d write %d %x", seed, i, rng.Uint64())
			status, body, err := crashDo(hc, "POST", base+"/api/messages", token, content)
			if err != nil {
				return // created or not, its ID is unknown: nothing to check
			}
			if status != http.StatusCreated {
				panic(fmt.Sprintf("create: status %d: %s", status, body))
			}
			var res struct{ ID uint64 }
			if err := json.Unmarshal(body, &res); err != nil {
				panic(err)
			}
			m.mu.Lock()
			m.msgs[res.ID] = &crashMsg{acked: content}
			m.acked++
			m.mu.Unlock()
			mine = append(mine, res.ID)
		case op < 8:
			id := mine[rng.IntN(len(mine))]
			content := fmt.Sprintf("client %d edit %d %x", seed, i, rng.Uint64())
			m.mu.Lock()
			m.msgs[id].inFlight = &crashOp{content: content}
			m.mu.Unlock()
			status, _, err := crashDo(hc, "PATCH", fmt.Sprintf("%s/api/messages/%d", base, id), token, content)
			if err != nil {
				return
			}
			m.mu.Lock()
			if status == http.StatusOK {
				m.msgs[id].acked, m.msgs[id].inFlight = content, nil
				m.acked++
			}
			m.mu.Unlock()
		default:
			k := rng.IntN(len(mine))
			id := mine[k]
			m.mu.Lock()
			m.msgs[id].inFlight = &crashOp{del: true}
			m.mu.Unlock()
			status, _, err := crashDo(hc, "DELETE", fmt.Sprintf("%s/api/messages/%d", base, id), token, "")
			if err != nil {
				return
			}
			m.mu.Lock()
			if status == http.StatusNoContent {
				m.msgs[id].deleted, m.msgs[id].inFlight = true, nil
				m.acked++
			}
			m.mu.Unlock()
			mine = append(mine[:k], mine[k+1:]...)
		}
	}
}

// verify reads every known message back from a restarted server and
// settles the requests the kill cut off to what the server says, so the
// next round starts from a known state.
func (m *crashModel) verify(t *testing.T, base, token string, round int) {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	if status, _, err := crashDo(hc, "GET", base+"/healthz", "", ""); err != nil || status != http.StatusOK {
		t.Fatalf("round %d: healthz after restart = %d, %v", round, status, err)
	}
	for id, msg := range m.msgs {
		status, body, err := crashDo(hc, "GET", fmt.Sprintf("%s/api/messages/%d", base, id), token, "")
		if err != nil {
			t.Fatalf("round %d: GET message %d: %v", round, id, err)
		}
		var got struct{ Content string }
		if status == http.StatusOK {
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
		}
		present := status == http.StatusOK
		switch {
		case status != http.StatusOK && status != http.StatusNotFound:
			t.Errorf("round %d: message %d: status %d", round, id, status)
		case msg.deleted && present:
			t.Errorf("round %d: message %d was deleted (204) but is back: %q", round, id, got.Content)
		case msg.deleted:
		case msg.inFlight == nil && !present:
			t.Errorf("round %d: message %d, acknowledged as %q, is lost", round, id, msg.acked)
		case msg.inFlight == nil && got.Content != msg.acked:
			t.Errorf("round %d: message %d holds %q, want the acknowledged %q", round, id, got.Content, msg.acked)
		case msg.inFlight == nil: // as acknowledged
		case msg.inFlight.del && present && got.Content != msg.acked:
			t.Errorf("round %d: message %d holds %q, want the acknowledged %q (its delete was cut off)", round, id, got.Content, msg.acked)
		case !msg.inFlight.del && !present:
			t.Errorf("round %d: message %d is gone, but only an edit was cut off", round, id)
		case !msg.inFlight.del && got.Content != msg.acked && got.Content != msg.inFlight.content:
			t.Errorf("round %d: message %d holds %q, neither the acknowledged %q nor the cut-off %q", round, id, got.Content, msg.acked, msg.inFlight.content)
		}
		// Settle: what the server holds now is the truth to go on from.
		msg.inFlight, msg.deleted = nil, !present
		if present {
			msg.acked = got.Content
		}
	}
	// The change log agrees: replayed from its start through the stream,
	// it rebuilds exactly what the server holds, so a change was logged if
	// and only if it committed, crash or no crash.
	replayed := replayChangeLog(t, base, token, round)
	for id, msg := range m.msgs {
		content, logged := replayed[id]
		switch {
		case logged == msg.deleted:
			t.Errorf("round %d: message %d: present in the replayed log %v, on the server %v", round, id, logged, !msg.deleted)
		case logged && content != msg.acked:
			t.Errorf("round %d: message %d: the log ends at %q, the server holds %q", round, id, content, msg.acked)
		}
	}
	for id, content := range replayed {
		if _, known := m.msgs[id]; known {
			continue
		}
		// A create cut off by the kill, unknown to the model, that committed.
		status, body, err := crashDo(hc, "GET", fmt.Sprintf("%s/api/messages/%d", base, id), token, "")
		if err != nil || status != http.StatusOK || !bytes.Contains(body, []byte(content)) {
			t.Errorf("round %d: the log holds message %d (%q), the server answers %d %s", round, id, content, status, body)
		}
	}

	// The word index answers for what survived.
	status, _, err := crashDo(hc, "GET", base+"/api/messages?q=client", token, "")
	if err != nil || status != http.StatusOK {
		t.Errorf("round %d: search after restart = %d, %v", round, status, err)
	}
}

func crashRegister(t *testing.T, base string) string {
	t.Helper()
	res, err := http.Post(base+"/api/register", "application/json",
		strings.NewReader(`{"email":"crash@example.com","password":"crash test password"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct{ Token string }
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil || out.Token == "" {
		t.Fatalf("register: %d %v", res.StatusCode, err)
	}
	return out.Token
}

func crashDo(hc *http.Client, method, url, token, content string) (int, []byte, error) {
	var body io.Reader
	if content != "" {
		b, _ := json.Marshal(map[string]string{"content": content})
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return 0, nil, err
	}
	if content != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, nil, err
	}
	return res.StatusCode, b, nil
}

// replayChangeLog reads the whole change log through the live stream and
// folds it into the messages it leaves: ID → content. Positions must rise,
// never repeat, and every change must fit the state before it: no update
// of a message the log never created, no creation of one it has. The
// replay shows each message as it is now, so it skips the changes of a
// message deleted since and shows its deletion alone.
func replayChangeLog(t *testing.T, base, token string, round int) map[uint64]string {
	t.Helper()
	req, err := http.NewRequest("GET", base+"/api/messages/stream?lastEventId=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("round %d: stream: %v %v", round, res, err)
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
	state := make(map[uint64]string)
	var pos uint64
	var event string
	for {
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("round %d: the stream ended during the replay", round)
			}
			line = l
		case <-time.After(time.Second):
			return state // caught up: nothing is being written
		}
		field, value, _ := strings.Cut(line, ": ")
		switch field {
		case "id":
			n, _ := strconv.ParseUint(value, 10, 64)
			if n <= pos {
				t.Fatalf("round %d: change %d follows %d: a repeat, or out of order", round, n, pos)
			}
			pos = n
		case "event":
			event = value
		case "data":
			var m struct {
				ID      uint64
				Content string
			}
			if err := json.Unmarshal([]byte(value), &m); err != nil {
				t.Fatal(err)
			}
			_, exists := state[m.ID]
			switch {
			case event == "message.created" && !exists:
				state[m.ID] = m.Content
			case event == "message.updated" && exists:
				state[m.ID] = m.Content
			case event == "message.deleted":
				delete(state, m.ID)
			default:
				t.Fatalf("round %d: change %d: %s of message %d, which exists %v", round, pos, event, m.ID, exists)
			}
		}
	}
}
