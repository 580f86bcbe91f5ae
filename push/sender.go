// Package push delivers Herald's notifications to browsers through Web
// Push: the payload encrypted for each subscription (RFC 8291,
// aes128gcm) and signed for its push service (RFC 8292, VAPID) by
// github.com/SherClockHolmes/webpush-go, sent by a loop that reads the
// notifications from the store's change log as the live stream's hub
// does, queues one delivery per subscription in the store, and works
// the queue: retries with backoff, a bounded pool of senders with a cap
// per push service, and a dialer that refuses private addresses.
//
// Durable and once: the position in the log and the queue move in one
// store transaction, and a delivery is claimed for a lease before it is
// sent, so a restart or a killed instance loses no push, and repeats
// only those whose push service's answer was not recorded. On a store
// several instances share, only the leading one sends.
package push

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/SherClockHolmes/webpush-go"
	"github.com/VictoriaMetrics/metrics"

	"herald/model"
)

// Store is what the sender asks of a store: its change log, and the
// queue of deliveries with the position it was filled up to.
type Store interface {
	ChangeHead(ctx context.Context) (head uint64, changed <-chan struct{}, err error)
	ChangesAfter(ctx context.Context, after uint64, max int) ([]*model.Change, uint64, error)
	// Message reads a message as it is now (model.ByServer). Errors:
	// model.ErrNotFound once it is deleted.
	Message(ctx context.Context, by model.Caller, id uint64) (*model.User, *model.Message, error)
	VAPIDKeys(ctx context.Context, generate func() (model.VAPIDKeys, error)) (model.VAPIDKeys, error)
	// PushPosition returns the last change whose pushes are queued, and
	// false when none was ever stored.
	PushPosition(ctx context.Context) (uint64, bool, error)
	// QueuePushes queues each notice's push to every subscription of
	// its account and moves the position from from to to, in one
	// transaction. Errors: model.ErrConflict when the position is not
	// from.
	QueuePushes(ctx context.Context, from, to uint64, notices []model.PushNotice) error
	// ClaimPushes returns up to max deliveries due by now, but none to
	// an endpoint of the push services busy names (origins: scheme and
	// host), and puts each off until now+lease.
	ClaimPushes(ctx context.Context, now time.Time, lease time.Duration, max int, busy []string) ([]*model.PushDelivery, error)
	// FinishPush records a delivery's outcome; at is the time of a
	// success or of the next try.
	FinishPush(ctx context.Context, d *model.PushDelivery, outcome model.PushOutcome, at time.Time) error
}

// Config sets a sender up. Contact is required.
type Config struct {
	// Contact is the VAPID subject: a mailto: or https: URL, sent as
	// given.
	Contact string
	// PublicURL is where people reach the server; the links pushes
	// carry start with it ("" for links relative to the web client's
	// origin).
	PublicURL string
	// AllowPrivate lets endpoints reach private addresses (tests,
	// private networks).
	AllowPrivate bool
	// Resolver finds push services' addresses; nil is net.DefaultResolver.
	Resolver Resolver
	// TLS is the client's TLS configuration; nil trusts the system's
	// roots. Tests give their push service's.
	TLS *tls.Config
	// Workers bounds the pushes sent at once, PerOrigin those to one
	// push service, so a slow or hostile one holds at most its share.
	Workers, PerOrigin int
	// RetryBase is the first retry's wait, doubled at each attempt up
	// to RetryMax; zero means 10 s and 1 h.
	RetryBase, RetryMax time.Duration
	// Lease is how long a claimed delivery is put off; a sender that
	// dies with it leaves it to be sent again then. Zero means 2 min.
	Lease time.Duration
	// Poll is how often the queue is looked at for retries come due;
	// zero means 1 s.
	Poll time.Duration
	// Leading, when set, tells whether this instance is the one that
	// sends (on a store several instances share).
	Leading func() bool
	Metrics *metrics.Set // nil: not recorded
	Logger  *slog.Logger // nil discards
	Now     func() time.Time
}

// The bounds of pushing.
const (
	defaultWorkers   = 16
	defaultPerOrigin = 4
	// backlogPerOrigin is how many deliveries to one push service may
	// wait in memory before its next are left in the store; maxHeld
	// bounds those held in all, claimBatch what one claim takes.
	backlogPerOrigin = 64
	maxHeld          = 512
	claimBatch       = 128
	// connectTimeout and answerTimeout bound a push: the connection
	// (TLS included), then the answer's headers; the body read after is
	// bounded by maxAnswerBytes.
	connectTimeout = 10 * time.Second
	answerTimeout  = 20 * time.Second
	maxAnswerBytes = 4 << 10
	changesBatch   = 256
)

// Sender pushes the notifications of a store's change log.
type Sender struct {
	store   Store
	cfg     Config
	keys    model.VAPIDKeys
	private string // the VAPID keys as webpush-go takes them
	public  string
	client  *http.Client
	log     *slog.Logger

	sent, retried, failed, dropped *metrics.Counter

	mu       sync.Mutex
	held     map[[2]uint64]bool // deliveries in memory, queued or being sent
	perQueue map[string]*originQueue
	slots    chan struct{} // one per push being sent
	wake     chan struct{}
	workers  sync.WaitGroup
}

type originQueue struct {
	waiting []*model.PushDelivery
	sending int
}

// GenerateKeys makes a VAPID key pair: P-256.
func GenerateKeys() (model.VAPIDKeys, error) {
	k, err := ecdh.P256().GenerateKey(rand.Reader)
	if err != nil {
		return model.VAPIDKeys{}, err
	}
	return model.VAPIDKeys{Private: k.Bytes(), Public: k.PublicKey().Bytes()}, nil
}

// PublicKey is the VAPID public key as the API serves it: the
// uncompressed point, base64url without padding.
func PublicKey(k model.VAPIDKeys) string { return base64.RawURLEncoding.EncodeToString(k.Public) }

// New returns a sender over store; it reads (or makes) the VAPID key
// pair.
func New(ctx context.Context, store Store, cfg Config) (*Sender, error) {
	if err := CheckContact(cfg.Contact); err != nil {
		return nil, err
	}
	keys, err := store.VAPIDKeys(ctx, GenerateKeys)
	if err != nil {
		return nil, fmt.Errorf("reading the VAPID key pair: %w", err)
	}
	if cfg.Workers <= 0 {
		cfg.Workers = defaultWorkers
	}
	if cfg.PerOrigin <= 0 {
		cfg.PerOrigin = defaultPerOrigin
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = 10 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = time.Hour
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 2 * time.Minute
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	s := &Sender{store: store, cfg: cfg, keys: keys, log: cfg.Logger,
		private: base64.RawURLEncoding.EncodeToString(keys.Private), public: PublicKey(keys),
		held: make(map[[2]uint64]bool), perQueue: make(map[string]*originQueue),
		slots: make(chan struct{}, cfg.Workers), wake: make(chan struct{}, 1)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	set := cfg.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	s.sent = set.GetOrCreateCounter("herald_push_sent_total")
	s.retried = set.GetOrCreateCounter("herald_push_retried_total")
	s.failed = set.GetOrCreateCounter("herald_push_failed_total")
	s.dropped = set.GetOrCreateCounter("herald_push_dropped_total")
	d := &dialer{resolver: cfg.Resolver, allowPrivate: cfg.AllowPrivate, net: net.Dialer{Timeout: connectTimeout}}
	transport := &http.Transport{
		DialContext:           d.DialContext,
		TLSClientConfig:       cfg.TLS,
		TLSHandshakeTimeout:   connectTimeout,
		ResponseHeaderTimeout: answerTimeout,
		MaxIdleConnsPerHost:   cfg.PerOrigin,
		MaxConnsPerHost:       cfg.PerOrigin,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	s.client = &http.Client{
		Transport: transport,
		Timeout:   connectTimeout + answerTimeout,
		// A push service answers; it never sends Herald elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return s, nil
}

// CheckContact checks a --push-contact value: a mailto: or https: URL.
func CheckContact(contact string) error {
	u, err := url.Parse(contact)
	switch {
	case contact == "":
		return errors.New("the push contact is empty")
	case err != nil:
		return fmt.Errorf("the push contact %q is not a URL: %w", contact, err)
	case u.Scheme == "mailto" && strings.Contains(u.Opaque, "@"):
		return nil
	case u.Scheme == "https" && u.Host != "":
		return nil
	}
	return fmt.Errorf("the push contact %q must be a mailto: URL (mailto:admin@example.com) or an https: URL", contact)
}

// Run sends until ctx ends, then waits for the pushes being sent.
func (s *Sender) Run(ctx context.Context) {
	defer s.workers.Wait()
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	for {
		var changed <-chan struct{}
		if s.cfg.Leading == nil || s.cfg.Leading() {
			var err error
			if changed, err = s.queueNew(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reading notifications to push", "err", err)
			}
			if err := s.claim(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("reading the pushes due", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-s.wake:
		case <-tick.C:
		}
	}
}

// queueNew queues the pushes of the notifications logged since the
// stored position, and returns a channel closed when the log grows.
func (s *Sender) queueNew(ctx context.Context) (<-chan struct{}, error) {
	head, changed, err := s.store.ChangeHead(ctx)
	if err != nil {
		return nil, err
	}
	pos, ok, err := s.store.PushPosition(ctx)
	if err != nil {
		return changed, err
	}
	if !ok {
		// A first start pushes what comes from now on, not the past.
		err := s.store.QueuePushes(ctx, 0, head, nil)
		if errors.Is(err, model.ErrConflict) {
			err = nil
		}
		return changed, err
	}
	for pos < head {
		chs, _, err := s.store.ChangesAfter(ctx, pos, changesBatch)
		if errors.Is(err, model.ErrChangeUnknown) {
			// Trimmed away while no sender ran: what it held is older
			// than any push would be worth.
			s.log.Warn("the change log no longer holds the push position; pushes from there on are skipped", "from", pos, "to", head)
			return changed, s.moveOn(ctx, pos, head, nil)
		}
		if err != nil || len(chs) == 0 {
			return changed, err
		}
		var notices []model.PushNotice
		now := s.cfg.Now()
		for _, ch := range chs {
			n := ch.Notification
			if ch.Kind != model.NotificationCreated || ch.Gone || n == nil || !ch.At.Add(model.PushTTL).After(now) {
				continue
			}
			notices = append(notices, model.PushNotice{NotificationID: n.ID, UserID: ch.UserID, Kind: n.Kind,
				Payload: Payload(n, s.cfg.PublicURL), Expires: ch.At.Add(model.PushTTL)})
		}
		next := chs[len(chs)-1].Seq
		if err := s.moveOn(ctx, pos, next, notices); err != nil {
			return changed, err
		}
		pos = next
	}
	return changed, nil
}

// moveOn queues notices and moves the position; another sender having
// moved it (a lead changing hands) is no failure, its queue holds them.
func (s *Sender) moveOn(ctx context.Context, from, to uint64, notices []model.PushNotice) error {
	err := s.store.QueuePushes(ctx, from, to, notices)
	if errors.Is(err, model.ErrConflict) {
		return errors.New("another sender moved the push position")
	}
	return err
}

// claim takes the deliveries due and hands them to their push services'
// queues. A push service whose queue is full is left out of the claim,
// so a slow or hostile one cannot fill the sender's memory, nor keep the
// others' pushes from being claimed.
func (s *Sender) claim(ctx context.Context) error {
	s.mu.Lock()
	held := len(s.held)
	busy := []string{}
	for origin, q := range s.perQueue {
		if len(q.waiting) >= backlogPerOrigin {
			busy = append(busy, origin)
		}
	}
	s.mu.Unlock()
	if held >= maxHeld {
		return nil
	}
	due, err := s.store.ClaimPushes(ctx, s.cfg.Now(), s.cfg.Lease, claimBatch, busy)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range due {
		key := [2]uint64{d.NotificationID, d.SubscriptionID}
		if s.held[key] {
			continue
		}
		origin := OriginOf(d.Subscription.Endpoint)
		q := s.perQueue[origin]
		if q == nil {
			q = &originQueue{}
			s.perQueue[origin] = q
		}
		s.held[key] = true
		q.waiting = append(q.waiting, d)
		s.startLocked(ctx, origin, q)
	}
	return nil
}

// startLocked starts sending origin's queued deliveries, up to its cap.
func (s *Sender) startLocked(ctx context.Context, origin string, q *originQueue) {
	for q.sending < s.cfg.PerOrigin && len(q.waiting) > 0 {
		d := q.waiting[0]
		q.waiting = q.waiting[1:]
		q.sending++
		s.workers.Add(1)
		go s.work(ctx, origin, d)
	}
}

// work sends one delivery in a slot of the pool, records how it went and
// starts the next of its push service's.
func (s *Sender) work(ctx context.Context, origin string, d *model.PushDelivery) {
	defer s.workers.Done()
	select {
	case s.slots <- struct{}{}:
		s.deliver(ctx, d)
		<-s.slots
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, [2]uint64{d.NotificationID, d.SubscriptionID})
	q := s.perQueue[origin]
	q.sending--
	if ctx.Err() == nil {
		s.startLocked(ctx, origin, q)
	}
	if q.sending == 0 && len(q.waiting) == 0 {
		delete(s.perQueue, origin)
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// deliver sends d and records the outcome. Logs name the subscription
// and the push service's origin, never a key, a secret or the payload.
func (s *Sender) deliver(ctx context.Context, d *model.PushDelivery) {
	now := s.cfg.Now()
	if !now.Before(d.Expires) {
		s.finish(ctx, d, model.PushDropped, now)
		s.failed.Inc()
		return
	}
	logged := []any{"subscription", d.SubscriptionID, "notification", d.NotificationID, "service", OriginOf(d.Subscription.Endpoint)}
	// A push carries the message as it is when it goes, not as it was
	// when it was queued: one deleted meanwhile is not pushed at all, one
	// edited is pushed as it reads now (a retry can come a day later).
	current, err := s.currentPayload(ctx, d.Payload)
	switch {
	case errors.Is(err, model.ErrNotFound):
		s.log.Info("push dropped: its message was deleted", logged...)
		s.finish(ctx, d, model.PushDropped, now)
		s.dropped.Inc()
		return
	case err != nil:
		// The store failed: tried again after the lease, as a sender
		// that stopped would leave it.
		s.log.Warn("push not sent: reading its message failed", append(logged, "err", err)...)
		return
	}
	d.Payload = current
	status, retryAfter, err := s.send(ctx, d, now)
	if ctx.Err() != nil {
		// Stopping: the lease gives it to the next sender.
		return
	}
	switch {
	case errors.Is(err, ErrPrivateAddress):
		s.log.Warn("push refused: the push service's address is private", logged...)
		s.finish(ctx, d, model.PushDropped, now)
		s.dropped.Inc()
	case err != nil || status == http.StatusTooManyRequests || status >= 500:
		wait := s.backoff(d.Attempts)
		if retryAfter > 0 {
			wait = retryAfter
		}
		next := now.Add(wait)
		if !next.Before(d.Expires) {
			s.log.Warn("push given up: its time to live passed", append(logged, "status", status, "err", errText(err))...)
			s.finish(ctx, d, model.PushDropped, now)
			s.failed.Inc()
			return
		}
		s.log.Info("push to be tried again", append(logged, "status", status, "err", errText(err), "wait", wait.String())...)
		s.finish(ctx, d, model.PushRetry, next)
		s.retried.Inc()
	case status >= 200 && status < 300:
		s.finish(ctx, d, model.PushDelivered, now)
		s.sent.Inc()
	case status == http.StatusNotFound || status == http.StatusGone:
		s.log.Info("push subscription gone; deleted", append(logged, "status", status)...)
		s.finish(ctx, d, model.PushSubscriptionGone, now)
		s.failed.Inc()
	default:
		s.log.Warn("push refused by the push service; dropped", append(logged, "status", status)...)
		s.finish(ctx, d, model.PushDropped, now)
		s.dropped.Inc()
	}
}

// currentPayload is queued, a payload Payload made, with its body the
// text of its message as it is now. Errors: model.ErrNotFound when the
// message is deleted.
func (s *Sender) currentPayload(ctx context.Context, queued []byte) ([]byte, error) {
	var p payload
	if err := json.Unmarshal(queued, &p); err != nil || p.MessageID == 0 {
		return queued, nil // not one of Payload's: sent as it was made
	}
	_, m, err := s.store.Message(ctx, model.ByServer(), p.MessageID)
	if err != nil {
		return nil, err
	}
	p.Body = cut(m.Content, bodyRunes)
	return p.fit(), nil
}

// errText is err for the log without the URL an *url.Error names: an
// endpoint's path is the device's address at its push service, not for
// the log.
func errText(err error) string {
	if err == nil {
		return ""
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Op + ": " + urlErr.Err.Error()
	}
	return err.Error()
}

func (s *Sender) finish(ctx context.Context, d *model.PushDelivery, outcome model.PushOutcome, at time.Time) {
	if err := s.store.FinishPush(ctx, d, outcome, at); err != nil && ctx.Err() == nil {
		s.log.Warn("recording a push's outcome; it may be sent again", "subscription", d.SubscriptionID, "notification", d.NotificationID, "err", err)
	}
}

// backoff is the wait before try attempts+2: RetryBase doubled per
// attempt, up to RetryMax, less up to a fifth at random so that pushes
// failing together do not come back together.
func (s *Sender) backoff(attempts int) time.Duration {
	wait := s.cfg.RetryBase << min(attempts, 20)
	if wait <= 0 || wait > s.cfg.RetryMax {
		wait = s.cfg.RetryMax
	}
	return wait - time.Duration(mrand.Int64N(int64(wait)/5+1))
}

// send pushes d once and returns the push service's status and the wait
// its Retry-After asks for (zero when none).
func (s *Sender) send(ctx context.Context, d *model.PushDelivery, now time.Time) (int, time.Duration, error) {
	// TTL is the contract's whole day on every try: a push service
	// holds a push that long at most, and the sender stops trying at the
	// notification's time plus the same day.
	sub := &webpush.Subscription{Endpoint: d.Subscription.Endpoint, Keys: webpush.Keys{
		P256dh: base64.RawURLEncoding.EncodeToString(d.Subscription.P256dh),
		Auth:   base64.RawURLEncoding.EncodeToString(d.Subscription.Auth),
	}}
	urgency := webpush.UrgencyNormal
	if d.Kind == model.NotifyMention {
		urgency = webpush.UrgencyHigh
	}
	resp, err := webpush.SendNotificationWithContext(ctx, d.Payload, sub, &webpush.Options{
		HTTPClient: s.client,
		// webpush-go prefixes "mailto:" to any subject not starting with
		// "https:", so a mailto: contact is given without its scheme, to
		// be sent exactly as configured.
		Subscriber:      strings.TrimPrefix(s.cfg.Contact, "mailto:"),
		Topic:           Topic(s.keys.Public, d.NotificationID),
		TTL:             int(model.PushTTL / time.Second),
		Urgency:         urgency,
		VAPIDPublicKey:  s.public,
		VAPIDPrivateKey: s.private,
	})
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswerBytes))
	return resp.StatusCode, retryAfter(resp.Header.Get("Retry-After"), now), nil
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		return time.Duration(max(0, min(secs, int64(model.PushTTL/time.Second)))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), model.PushTTL)
	}
	return 0
}

// OriginOf is an endpoint's push service: its scheme and host.
func OriginOf(endpoint string) string { return model.PushOrigin(endpoint) }
