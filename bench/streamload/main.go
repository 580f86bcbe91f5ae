// Command streamload is the load generator of bench/stream.sh: it drives
// Herald's live stream (GET /api/messages/stream) at a running server and
// prints what it measured, ending with one machine-readable RESULT line.
//
//	streamload -base http://127.0.0.1:PORT -mode delivery     # 1,000 subscribers, 200 creates/s for 10 s
//	streamload -base http://127.0.0.1:PORT -mode idle         # 10,000 idle subscribers
//	streamload -base http://127.0.0.1:PORT -mode create-cost  # create rate with 0 and 1,000 subscribers
//
// With -write-base, creates go to other servers than the streams, for
// several Herald instances on one PostgreSQL database: streams on -base,
// creates spread over the -write-base list, so delivery crosses instances.
//
// Modes:
//
//   - delivery: opens -subscribers streams, waits until each has received
//     its first bytes, then creates messages at -rate per second for
//     -duration on a steady schedule. The delay of a (subscriber, message)
//     pair is the arrival of its message.created event minus the arrival of
//     the 201 that created it; the mode prints p50/p90/p99/max and checks
//     that every subscriber got every message once and in order.
//   - idle: opens -idle streams in two halves, holds them for -hold, and
//     with -herald-pid reads Herald's RssAnon and VmRSS before, at the half
//     and with all of them open (only this program knows those moments).
//   - create-cost: -cost-writers writers create as fast as they can for
//     -cost-duration, alternately with 0 and with -subscribers streams open
//     (phases 0, S, 0, S), and prints both rates and Herald's CPU per create.
//
// Only the servers at -base and -write-base are contacted. The program registers its own
// accounts (registration is rate-limited per address: start Herald with a
// wide --registrations-per-address) and raises its own file-descriptor
// limit to the hard limit, since every stream is a socket.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// config is the parsed flags; main hands it to the mode it runs.
type config struct {
	base        string
	writeBases  []string // where creates go; [base] unless -write-base says
	mode        string
	subscribers int
	perAccount  int
	rate        int
	duration    time.Duration
	writers     int
	idle        int
	hold        time.Duration
	costWriters int
	costTime    time.Duration
	costPhases  string
	heraldPID   int
	parallel    int
	drain       time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.base, "base", "", "Herald's base URL, e.g. http://127.0.0.1:40123 (required)")
	var writeBase string
	flag.StringVar(&writeBase, "write-base", "", "comma-separated base URLs that creates go to, spread over them by writer; default -base")
	flag.StringVar(&c.mode, "mode", "delivery", "delivery, idle or create-cost")
	flag.IntVar(&c.subscribers, "subscribers", 1000, "streams open in delivery and create-cost")
	flag.IntVar(&c.perAccount, "per-account", 16, "streams per account (Herald's --max-streams-per-user must allow it)")
	flag.IntVar(&c.rate, "rate", 200, "delivery: creates per second")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "delivery: how long to create")
	flag.IntVar(&c.writers, "writers", 8, "delivery: goroutines that share the create schedule")
	flag.IntVar(&c.idle, "idle", 10000, "idle: streams to open")
	flag.DurationVar(&c.hold, "hold", 5*time.Second, "idle: how long to hold the streams once all are open")
	flag.IntVar(&c.costWriters, "cost-writers", 16, "create-cost: concurrent writers")
	flag.DurationVar(&c.costTime, "cost-duration", 5*time.Second, "create-cost: length of each phase")
	flag.StringVar(&c.costPhases, "cost-phases", "0,S,0,S", "create-cost: subscribers per phase, S meaning -subscribers")
	flag.IntVar(&c.heraldPID, "herald-pid", 0, "Herald's process id, to read its memory and CPU from /proc (optional)")
	flag.IntVar(&c.parallel, "connect-parallel", 32, "streams being opened at once")
	flag.DurationVar(&c.drain, "drain-timeout", 10*time.Second, "delivery: how long to wait for the last events after the last create")
	flag.Parse()
	if c.base == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	c.base = strings.TrimRight(c.base, "/")
	for b := range strings.SplitSeq(writeBase, ",") {
		if b = strings.TrimRight(strings.TrimSpace(b), "/"); b != "" {
			c.writeBases = append(c.writeBases, b)
		}
	}
	if len(c.writeBases) == 0 {
		c.writeBases = []string{c.base}
	}
	if c.subscribers < 1 || c.perAccount < 1 || c.rate < 1 || c.writers < 1 || c.idle < 1 ||
		c.costWriters < 1 || c.parallel < 1 || c.duration <= 0 || c.costTime <= 0 {
		fatalf("counts and durations must be positive")
	}

	need := c.subscribers
	if c.mode == "idle" {
		need = c.idle
	}
	raiseFileLimit(need + c.costWriters + c.writers + 64)

	var err error
	switch c.mode {
	case "delivery":
		err = delivery(c)
	case "idle":
		err = idle(c)
	case "create-cost":
		err = createCost(c)
	default:
		fatalf("unknown -mode %q", c.mode)
	}
	if err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "streamload: "+format+"\n", args...)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Printf("[%s] "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// raiseFileLimit lifts the soft RLIMIT_NOFILE to the hard limit and says
// so: every stream is a socket, and the default soft limit is often 1024.
// (Go already does this at start-up on Linux; doing it here makes the
// figure visible and the program independent of that.)
func raiseFileLimit(need int) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		logf("file-descriptor limit: unknown (%v)", err)
		return
	}
	was := lim.Cur
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			logf("file-descriptor limit: could not raise %d to %d: %v", was, lim.Max, err)
			lim.Cur = was
		}
	}
	logf("file-descriptor limit of streamload: soft %d (was %d), hard %d; this run needs about %d", lim.Cur, was, lim.Max, need)
	if lim.Cur < uint64(need) {
		logf("WARNING: the file-descriptor limit is below what this run needs; streams beyond it will fail to open")
	}
}

// --- HTTP ------------------------------------------------------------------

// newClient returns a client for conns concurrent connections to one host.
// Streams never reuse a connection, writers always do.
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:          conns,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ResponseHeaderTimeout: 30 * time.Second,
	}}
}

// postJSON posts body and returns the status and the answer, retrying a
// 429 or 503 after its Retry-After (registration is limited and hashes in
// a bounded queue) up to 10 times.
func postJSON(ctx context.Context, client *http.Client, url, token string, body []byte) (int, []byte, error) {
	for try := 0; ; try++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return resp.StatusCode, nil, err
		}
		if (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) && try < 10 {
			wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			time.Sleep(time.Duration(min(max(wait, 1), 10)) * time.Second)
			continue
		}
		return resp.StatusCode, b, nil
	}
}

// register creates n accounts, a few at a time (each costs Herald an
// argon2id hash), and returns their tokens.
func register(ctx context.Context, c config, client *http.Client, n int, label string) ([]string, error) {
	tokens := make([]string, n)
	prefix := fmt.Sprintf("streamload-%s-%d", label, time.Now().UnixNano())
	errs := make(chan error, n)
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(n, 4) {
		wg.Go(func() {
			for i := range work {
				body, _ := json.Marshal(map[string]string{
					"email":    fmt.Sprintf("%s-%d@example.com", prefix, i),
					"password": "streamload benchmark password",
				})
				code, b, err := postJSON(ctx, client, c.base+"/api/register", "", body)
				if err == nil && code != http.StatusCreated && code != http.StatusOK {
					err = fmt.Errorf("POST /api/register answered %d: %.300s", code, b)
				}
				var r struct{ Token string }
				if err == nil {
					err = json.Unmarshal(b, &r)
				}
				if err == nil && r.Token == "" {
					err = fmt.Errorf("POST /api/register answered no token: %.300s", b)
				}
				if err != nil {
					errs <- err
					continue
				}
				tokens[i] = r.Token
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return tokens, nil
}

// --- subscribers -----------------------------------------------------------

// arrival is one message.created event a subscriber read: the message id
// and when it arrived, in nanoseconds since the run's start.
type arrival struct {
	id uint64
	at int64
}

// subscriber is one open stream.
type subscriber struct {
	body     io.ReadCloser
	br       *bufio.Reader
	arrivals []arrival    // delivery only; preallocated, written by the reader alone
	count    atomic.Int64 // message.created events read
	resets   int          // reset events: the stream lost its place (never expected)
	closed   atomic.Bool  // the stream ended (read error or EOF)
	err      error        // why, read after the reader has returned
}

// open starts one stream and waits for its first bytes (Herald's retry:
// and ": connected" comment), so the stream is registered with the hub
// before the caller counts it as connected.
func open(ctx context.Context, client *http.Client, base, token string) (*subscriber, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/messages/stream", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		return nil, fmt.Errorf("stream answered %d: %s", resp.StatusCode, b)
	}
	s := &subscriber{body: resp.Body, br: bufio.NewReaderSize(resp.Body, 16<<10)}
	// The first event block ends with a blank line.
	for {
		line, err := s.br.ReadSlice('\n')
		if err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("stream ended before its first event: %w", err)
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			return s, nil
		}
	}
}

// openAll opens n streams, c.parallel at a time, stream i with token
// tokens[i/c.perAccount]. It returns the streams that opened and the first
// few errors of those that did not.
func openAll(ctx context.Context, c config, client *http.Client, tokens []string, from, n int) ([]*subscriber, []error) {
	subs := make([]*subscriber, n)
	errs := make([]error, n)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(c.parallel, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				subs[i], errs[i] = open(ctx, client, c.base, tokens[(from+i)/c.perAccount])
			}
		})
	}
	wg.Wait()
	var ok []*subscriber
	var failed []error
	for i := range n {
		if subs[i] != nil {
			ok = append(ok, subs[i])
		} else {
			failed = append(failed, errs[i])
		}
	}
	return ok, failed
}

// reportOpenErrors prints how many streams failed to open and why.
func reportOpenErrors(failed []error) {
	if len(failed) == 0 {
		return
	}
	counts := map[string]int{}
	for _, err := range failed {
		counts[err.Error()]++
	}
	logf("%d streams failed to open:", len(failed))
	shown := 0
	for msg, n := range counts {
		if shown++; shown > 5 {
			break
		}
		logf("  %d× %.200s", n, msg)
	}
}

// What the readers look for in a stream, and the start of a message's JSON.
const (
	eventPrefix = "event: "
	dataPrefix  = "data: "
	createdName = "message.created"
	resetName   = "reset"
	idPrefix    = `{"id":`
)

// record reads the stream until it ends, noting the id and arrival time of
// every message.created event. It parses only what it needs: the event
// name, and the digits after the {"id": that every message's JSON starts
// with, so the generator is not the bottleneck.
func (s *subscriber) record(start time.Time) {
	defer s.closed.Store(true)
	eventP, dataP, created, reset, idP := []byte(eventPrefix), []byte(dataPrefix), []byte(createdName), []byte(resetName), []byte(idPrefix)
	var kind []byte
	kindBuf := make([]byte, 0, 32)
	for {
		line, err := s.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A message longer than the buffer: its id is at the start,
			// which is what the next case looks at; skip the rest.
			err = nil
		}
		if err != nil {
			s.err = err
			return
		}
		switch {
		case len(line) <= 2 && len(bytes.TrimRight(line, "\r\n")) == 0:
			kind = nil
		case bytes.HasPrefix(line, eventP):
			kindBuf = append(kindBuf[:0], bytes.TrimRight(line[len(eventP):], "\r\n")...)
			kind = kindBuf
			if bytes.Equal(kind, reset) {
				s.resets++
			}
		case bytes.HasPrefix(line, dataP) && bytes.Equal(kind, created):
			at := time.Since(start).Nanoseconds()
			d := line[len(dataP):]
			if !bytes.HasPrefix(d, idP) {
				continue
			}
			d = d[len(idP):]
			var id uint64
			for _, ch := range d {
				if ch < '0' || ch > '9' {
					break
				}
				id = id*10 + uint64(ch-'0')
			}
			s.arrivals = append(s.arrivals, arrival{id: id, at: at})
			s.count.Add(1)
		}
	}
}

// drain reads and discards the stream until it ends: for streams whose
// content is not measured, at the least cost to this process.
func (s *subscriber) drain() {
	defer s.closed.Store(true)
	buf := make([]byte, 32<<10)
	for {
		if _, err := s.br.Read(buf); err != nil {
			s.err = err
			return
		}
	}
}

func closeAll(subs []*subscriber) {
	for _, s := range subs {
		s.body.Close()
	}
}

// --- Herald's process --------------------------------------------------------

// heraldMem returns Herald's RssAnon and VmRSS in KiB, or zeros without
// -herald-pid.
func heraldMem(pid int) (anon, rss int64) {
	if pid == 0 {
		return 0, 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "RssAnon:":
			anon, _ = strconv.ParseInt(f[1], 10, 64)
		case "VmRSS:":
			rss, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	return anon, rss
}

// cpuTicks returns the user+system CPU clock ticks of process pid (0 for
// none), from /proc/PID/stat; "self" reads this process.
func cpuTicks(pid string) int64 {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	// The command name may hold spaces; the fields after it are fixed.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}

// clockTick is USER_HZ, 100 on every Linux this runs on (getconf CLK_TCK
// needs cgo to ask).
const clockTick = 100

func mib(kib int64) float64 { return float64(kib) / 1024 }

// --- delivery ----------------------------------------------------------------

// createOne posts one message and returns its id and the time the 201
// arrived (after the headers, before reading the body: the body is a few
// hundred bytes already in the socket buffer).
func createOne(ctx context.Context, client *http.Client, url, token string, body []byte, start time.Time) (uint64, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	at := time.Since(start).Nanoseconds()
	if err != nil {
		return 0, 0, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != http.StatusCreated {
		return 0, 0, fmt.Errorf("POST /api/messages answered %d: %.200s", resp.StatusCode, b)
	}
	if !bytes.HasPrefix(b, []byte(idPrefix)) {
		return 0, 0, fmt.Errorf("POST /api/messages answered no id first: %.200s", b)
	}
	end := bytes.IndexAny(b, ",}")
	if end < 0 {
		return 0, 0, fmt.Errorf("POST /api/messages answered malformed JSON: %.200s", b)
	}
	id, err := strconv.ParseUint(string(b[len(idPrefix):end]), 10, 64)
	return id, at, err
}

// messageBody is the JSON of message k: a few varied words, so the hub
// renders a realistic event and the index does real work.
func messageBody(k int) []byte {
	words := []string{"apple", "river", "stone", "cloud", "lantern", "maple", "harbor", "violet", "ember", "quartz"}
	var sb strings.Builder
	sb.WriteString(`{"content":"stream benchmark message `)
	sb.WriteString(strconv.Itoa(k))
	for i := range 12 {
		sb.WriteByte(' ')
		sb.WriteString(words[(k*7+i*3)%len(words)])
	}
	sb.WriteString(`"}`)
	return []byte(sb.String())
}

type createdMsg struct {
	id   uint64
	at   int64 // when its 201 arrived, ns since start; 0 when it failed
	took int64 // ns from sending the POST to its 201
}

func delivery(c config) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := newClient(8)
	accounts := (c.subscribers + c.perAccount - 1) / c.perAccount
	logf("delivery: registering %d accounts for %d subscribers (%d streams each) and 1 writer account", accounts, c.subscribers, c.perAccount)
	tokens, err := register(ctx, c, admin, accounts+1, "delivery")
	if err != nil {
		return err
	}
	writerToken := tokens[accounts]

	total := c.rate * int(c.duration/time.Millisecond) / 1000
	streams := newClient(0)
	t0 := time.Now()
	subs, failed := openAll(ctx, c, streams, tokens, 0, c.subscribers)
	reportOpenErrors(failed)
	logf("delivery: %d of %d subscribers connected in %.1fs", len(subs), c.subscribers, time.Since(t0).Seconds())
	if len(subs) == 0 {
		return errors.New("no subscriber connected")
	}

	start := time.Now()
	var readers sync.WaitGroup
	for _, s := range subs {
		// Room for every message and a few more, so recording never
		// allocates while the clock runs.
		s.arrivals = make([]arrival, 0, total+64)
		readers.Go(func() { s.record(start) })
	}
	time.Sleep(500 * time.Millisecond) // let every reader block in its first read

	// A steady schedule: message k is due at k/rate seconds after the
	// first; writer w sends the messages k ≡ w (mod writers). A writer that
	// falls behind sends its next one at once, and that lateness is
	// counted, so a rate Herald cannot take shows in the output.
	msgs := make([]createdMsg, total)
	var late, createErrs atomic.Int64
	var firstErr atomic.Value
	writers := newClient(c.writers)
	period := time.Second / time.Duration(c.rate)
	sched := time.Now().Add(100 * time.Millisecond)
	logf("delivery: creating %d messages at %d/s for %s from %d writers", total, c.rate, c.duration, c.writers)
	var wg sync.WaitGroup
	for w := range c.writers {
		url := c.writeBases[w%len(c.writeBases)] + "/api/messages"
		wg.Go(func() {
			for k := w; k < total; k += c.writers {
				due := sched.Add(time.Duration(k) * period)
				if d := time.Until(due); d > 0 {
					time.Sleep(d)
				} else if d < -period {
					late.Add(1)
				}
				sent := time.Since(start).Nanoseconds()
				id, at, err := createOne(ctx, writers, url, writerToken, messageBody(k), start)
				if err != nil {
					createErrs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				msgs[k] = createdMsg{id: id, at: at, took: at - sent}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(sched)
	ok := int64(total) - createErrs.Load()
	logf("delivery: %d creates answered 201 in %.2fs (%.0f/s), %d failed, %d sent more than one period late",
		ok, elapsed.Seconds(), float64(ok)/elapsed.Seconds(), createErrs.Load(), late.Load())
	if e := firstErr.Load(); e != nil {
		logf("  first failure: %s", e)
	}

	// Wait until every open subscriber has all the messages, or -drain-timeout.
	deadline := time.Now().Add(c.drain)
	for time.Now().Before(deadline) {
		done := true
		for _, s := range subs {
			if !s.closed.Load() && s.count.Load() < ok {
				done = false
				break
			}
		}
		if done {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var endedEarly int
	for _, s := range subs {
		if s.closed.Load() {
			endedEarly++
		}
	}
	cancel()
	closeAll(subs)
	readers.Wait()

	return analyseDelivery(c, subs, msgs, endedEarly, createErrs.Load(), float64(ok)/elapsed.Seconds())
}

// percentile returns the p-quantile of sorted ns values, in ms.
func percentile(sorted []int64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return float64(sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]) / 1e6
}

func analyseDelivery(c config, subs []*subscriber, msgs []createdMsg, endedEarly int, createErrs int64, achieved float64) error {
	index := make(map[uint64]int, len(msgs))
	for k, m := range msgs {
		if m.at != 0 {
			index[m.id] = k
		}
	}
	var lost, dup, outOfOrder, unexpected, early, resets int64
	var minEarly int64
	delays := make([]int64, 0, len(subs)*len(index))
	seen := make([]uint8, len(msgs))
	for _, s := range subs {
		clear(seen)
		// Herald numbers messages in commit order and streams in commit
		// order, so ids must rise; schedule order may differ, since
		// concurrent writers race to the committer.
		var prev uint64
		resets += int64(s.resets)
		for _, a := range s.arrivals {
			k, ok := index[a.id]
			if !ok {
				unexpected++ // not one of ours, or its 201 was lost
				continue
			}
			if seen[k]++; seen[k] > 1 {
				dup++
				continue
			}
			if a.id < prev {
				outOfOrder++
			}
			prev = max(prev, a.id)
			d := a.at - msgs[k].at
			if d < 0 {
				// The event beat the 201 to this process: both left
				// Herald at about the same time.
				early++
				minEarly = min(minEarly, d)
				d = 0
			}
			delays = append(delays, d)
		}
		for k, m := range msgs {
			if m.at != 0 && seen[k] == 0 {
				lost++
			}
		}
	}
	slices.Sort(delays)
	pct := func(p float64) float64 { return percentile(delays, p) }
	var took []int64
	for _, m := range msgs {
		if m.at != 0 {
			took = append(took, m.took)
		}
	}
	slices.Sort(took)
	logf("create latency (POST → 201): p50 %.2f ms, p99 %.2f ms; creates achieved %.0f/s of %d/s asked",
		percentile(took, 0.5), percentile(took, 0.99), achieved, c.rate)
	if achieved < 0.95*float64(c.rate) {
		logf("WARNING: Herald did not keep up with %d creates/s: the delays are at %.0f/s", c.rate, achieved)
	}
	maxMs := 0.0
	if len(delays) > 0 {
		maxMs = float64(delays[len(delays)-1]) / 1e6
	}
	logf("delivery: %d subscribers × %d messages = %d pairs expected, %d delays measured",
		len(subs), len(index), len(subs)*len(index), len(delays))
	logf("delivery delay (201 → event): p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, max %.2f ms",
		pct(0.50), pct(0.90), pct(0.99), maxMs)
	logf("events ahead of their 201 (counted as 0): %d, at most %.2f ms ahead", early, float64(-minEarly)/1e6)
	logf("completeness: lost %d, duplicated %d, out of order %d, unexpected %d, reset events %d, streams that ended before the end %d",
		lost, dup, outOfOrder, unexpected, resets, endedEarly)
	fmt.Printf("RESULT mode=delivery rate=%.0f create_p50_ms=%.2f create_p99_ms=%.2f subscribers=%d requested=%d messages=%d create_errors=%d pairs=%d p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f early=%d lost=%d dup=%d out_of_order=%d unexpected=%d resets=%d ended=%d\n",
		achieved, percentile(took, 0.5), percentile(took, 0.99), len(subs), c.subscribers, len(index), createErrs, len(delays), pct(0.50), pct(0.90), pct(0.99), maxMs, early, lost, dup, outOfOrder, unexpected, resets, endedEarly)
	return nil
}

// --- idle ----------------------------------------------------------------------

func idle(c config) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin := newClient(8)
	accounts := (c.idle + c.perAccount - 1) / c.perAccount
	logf("idle: registering %d accounts for %d streams (%d each)", accounts, c.idle, c.perAccount)
	tokens, err := register(ctx, c, admin, accounts, "idle")
	if err != nil {
		return err
	}
	// Registration hashes passwords with argon2id (tens of MiB each);
	// give Herald's heap a moment to settle before the "before" figure.
	time.Sleep(3 * time.Second)
	anon0, rss0 := heraldMem(c.heraldPID)
	logf("idle: Herald before the streams: RssAnon %.1f MiB, VmRSS %.1f MiB", mib(anon0), mib(rss0))

	streams := newClient(0)
	var readers sync.WaitGroup
	var subs []*subscriber
	var failed []error
	half := c.idle / 2
	t0 := time.Now()
	var anonHalf, rssHalf int64
	for _, part := range [][2]int{{0, half}, {half, c.idle - half}} {
		if part[1] == 0 {
			continue
		}
		got, errs := openAll(ctx, c, streams, tokens, part[0], part[1])
		for _, s := range got {
			readers.Go(s.drain)
		}
		subs = append(subs, got...)
		failed = append(failed, errs...)
		if part[0] == 0 {
			time.Sleep(time.Second)
			anonHalf, rssHalf = heraldMem(c.heraldPID)
			logf("idle: %d streams open: RssAnon %.1f MiB, VmRSS %.1f MiB", len(subs), mib(anonHalf), mib(rssHalf))
		}
	}
	reportOpenErrors(failed)
	logf("idle: %d of %d streams connected in %.1fs; holding them %s", len(subs), c.idle, time.Since(t0).Seconds(), c.hold)
	time.Sleep(time.Second)
	anon1, rss1 := heraldMem(c.heraldPID)
	time.Sleep(c.hold)
	anon2, rss2 := heraldMem(c.heraldPID)
	open := 0
	for _, s := range subs {
		if !s.closed.Load() {
			open++
		}
	}
	// The later of the two readings, unless the first was higher: the
	// figure asked for is what holding the streams costs.
	anonN, rssN := max(anon1, anon2), max(rss1, rss2)
	logf("idle: %d streams still open after the hold; Herald: RssAnon %.1f MiB, VmRSS %.1f MiB (at the start of the hold %.1f / %.1f)",
		open, mib(anon2), mib(rss2), mib(anon1), mib(rss1))
	perSub, marginal := 0.0, 0.0
	if len(subs) > 0 && c.heraldPID != 0 {
		perSub = float64(anonN-anon0) * 1024 / float64(len(subs))
		if n2 := len(subs) - half; n2 > 0 {
			marginal = float64(anonN-anonHalf) * 1024 / float64(n2)
		}
		logf("idle: anonymous memory per stream: %.1f KiB ((with all − before)/N); %.1f KiB over the second half alone",
			perSub/1024, marginal/1024)
	}
	cancel()
	closeAll(subs)
	readers.Wait()
	fmt.Printf("RESULT mode=idle requested=%d connected=%d open_after_hold=%d anon_before_kib=%d rss_before_kib=%d anon_half_kib=%d anon_kib=%d rss_kib=%d per_stream_bytes=%.0f marginal_bytes=%.0f\n",
		c.idle, len(subs), open, anon0, rss0, anonHalf, anonN, rssN, perSub, marginal)
	return nil
}

// --- create-cost -------------------------------------------------------------

// phaseResult is one create-cost phase.
type phaseResult struct {
	subs      int
	creates   int64
	errors    int64
	rate      float64
	heraldCPU float64 // Herald's CPU seconds in the phase
	selfCPU   float64 // this program's
}

func createCost(c config) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var phases []int
	for p := range strings.SplitSeq(c.costPhases, ",") {
		switch p = strings.TrimSpace(p); p {
		case "S":
			phases = append(phases, c.subscribers)
		default:
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 {
				return fmt.Errorf("bad -cost-phases entry %q", p)
			}
			phases = append(phases, n)
		}
	}
	admin := newClient(8)
	accounts := (c.subscribers + c.perAccount - 1) / c.perAccount
	logf("create-cost: registering %d accounts for up to %d subscribers and %d writer accounts", accounts, c.subscribers, c.costWriters)
	tokens, err := register(ctx, c, admin, accounts+c.costWriters, "cost")
	if err != nil {
		return err
	}
	subTokens, writerTokens := tokens[:accounts], tokens[accounts:]
	writers := newClient(c.costWriters)
	pid := strconv.Itoa(c.heraldPID)

	var results []phaseResult
	for i, n := range phases {
		var subs []*subscriber
		var readers sync.WaitGroup
		if n > 0 {
			got, failed := openAll(ctx, c, newClient(0), subTokens, 0, min(n, len(subTokens)*c.perAccount))
			reportOpenErrors(failed)
			subs = got
			for _, s := range subs {
				readers.Go(s.drain)
			}
		}
		time.Sleep(time.Second) // connections settled, Herald idle
		h0, s0 := cpuTicks(pid), cpuTicks("self")
		var creates, errs atomic.Int64
		var firstErr atomic.Value
		t0 := time.Now()
		end := t0.Add(c.costTime)
		var wg sync.WaitGroup
		for w := range c.costWriters {
			url := c.writeBases[w%len(c.writeBases)] + "/api/messages"
			wg.Go(func() {
				for k := 0; time.Now().Before(end); k++ {
					_, _, err := createOne(ctx, writers, url, writerTokens[w], messageBody(k*c.costWriters+w), t0)
					if err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					creates.Add(1)
				}
			})
		}
		wg.Wait()
		el := time.Since(t0).Seconds()
		r := phaseResult{subs: len(subs), creates: creates.Load(), errors: errs.Load(), rate: float64(creates.Load()) / el,
			heraldCPU: float64(cpuTicks(pid)-h0) / clockTick, selfCPU: float64(cpuTicks("self")-s0) / clockTick}
		if c.heraldPID == 0 {
			r.heraldCPU = 0
		}
		results = append(results, r)
		logf("create-cost phase %d: %d subscribers, %d creates in %.1fs = %.0f/s, %d errors; Herald CPU %.2fs (%.2f ms per create), streamload CPU %.2fs",
			i+1, r.subs, r.creates, el, r.rate, r.errors, r.heraldCPU, 1000*r.heraldCPU/max(1, float64(r.creates)), r.selfCPU)
		if e := firstErr.Load(); e != nil {
			logf("  first failure: %s", e)
		}
		closeAll(subs)
		readers.Wait()
		time.Sleep(time.Second) // let Herald end the streams before the next phase
	}

	// Mean over the phases of each kind; the ratio compares them.
	var rate0, rateS, cpu0, cpuS, n0, nS, c0, cS float64
	for _, r := range results {
		if r.subs == 0 {
			rate0 += r.rate
			cpu0 += r.heraldCPU
			c0 += float64(r.creates)
			n0++
		} else {
			rateS += r.rate
			cpuS += r.heraldCPU
			cS += float64(r.creates)
			nS++
		}
	}
	if n0 == 0 || nS == 0 {
		return errors.New("create-cost needs phases with and without subscribers")
	}
	rate0, rateS = rate0/n0, rateS/nS
	perCreate0, perCreateS := 1000*cpu0/max(c0, 1), 1000*cpuS/max(cS, 1)
	extra := rate0/rateS - 1 // how much longer a create takes with the streams open
	cpuExtra := 0.0
	if perCreate0 > 0 {
		cpuExtra = perCreateS/perCreate0 - 1
	}
	logf("create-cost: %.0f creates/s without subscribers, %.0f/s with %d: each create costs %+.1f%% in time; Herald CPU per create %.2f ms → %.2f ms (%+.1f%%)",
		rate0, rateS, c.subscribers, 100*extra, perCreate0, perCreateS, 100*cpuExtra)
	var rates []string
	for _, r := range results {
		rates = append(rates, fmt.Sprintf("%d:%.0f", r.subs, r.rate))
	}
	fmt.Printf("RESULT mode=create-cost subscribers=%d writers=%d rate0=%.0f rateS=%.0f extra_pct=%.1f cpu_ms0=%.3f cpu_msS=%.3f cpu_extra_pct=%.1f phases=%s\n",
		c.subscribers, c.costWriters, rate0, rateS, 100*extra, perCreate0, perCreateS, 100*cpuExtra, strings.Join(rates, ","))
	return nil
}
