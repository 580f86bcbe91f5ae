// Package http serves Herald's API: the route table, bearer-token
// authentication, request decoding, response encoding and the mapping of
// errors to problem documents. It reaches storage only through the
// interfaces it declares (store.go), which main fills with a store.
package http

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/julienschmidt/httprouter"

	"herald/auth"
	"herald/http/netquirk"
	"herald/http/stream"
	"herald/http/web"
	"herald/model"
)

// Defaults for Config's zero values.
const (
	DefaultTokenTTL     = 30 * 24 * time.Hour
	DefaultMaxBodyBytes = 64 << 10
)

// Config tunes a Server. The zero value is usable.
type Config struct {
	TokenTTL     time.Duration // lifetime of issued tokens
	MaxBodyBytes int64         // larger request bodies get 413
	Logger       *slog.Logger  // access and error log; nil discards
	Limits       Limits        // guessing and write limits; zero values take defaults
	// Registration says who may register, unless the database holds an
	// administrator's setting (FollowSettings); the zero value is
	// RegistrationOpen. Limits.WritesPerAccount is likewise the write
	// limit for a database that holds none.
	Registration Registration
	// Version is the running build's version, which GET /api/info tells
	// administrators.
	Version string
	// PublicURL is the address people reach this server at (scheme and
	// host, as https://herald.example.com), for the links of password
	// resets; empty means the origin each request was made to. Links in
	// e-mails never follow a request's Host header: a Mailer needs it.
	PublicURL string
	// Mailer, when set, sends e-mail: password-reset links on request.
	// Without it, POST /api/password-reset/request is 404.
	Mailer Mailer
	// Metrics, when set, receives request counts and latencies by route
	// pattern and status, login outcomes and refusals by the guessing
	// limits. main owns the set and serves it on its own listener.
	Metrics *metrics.Set
	// Now is the clock of the limiters and of token expiry on streams; nil
	// means time.Now. Tests pass their own, the store's.
	Now func() time.Time
	// Streams limits live streams; zero values take defaults.
	Streams stream.Limits
	// Push turns Web Push's routes on (see push.go); the zero value
	// leaves them off.
	Push PushConfig
}

// Server is Herald's HTTP handler.
type Server struct {
	store    Store
	hasher   *auth.Hasher
	tokenTTL time.Duration
	maxBody  int64
	log      *slog.Logger
	guard    *guard
	metrics  *metrics.Set // nil: not collected
	now      func() time.Time
	settings settingsState
	version  string
	public   string
	streams  *stream.Hub
	router   *httprouter.Router
	push     pushState

	// mailer sends e-mail (nil: none is sent); resetsMailing holds a
	// token for each reset link being made (maxResetsMailing).
	mailer        Mailer
	resetsMailing chan struct{}

	// background is the work requests leave running after their answer
	// (a reset link being made), under backgroundCtx; StopBackground ends
	// it before the store closes.
	background       sync.WaitGroup
	backgroundCtx    context.Context
	cancelBackground context.CancelFunc

	// methodLabels are the methods the metrics name; any other is counted
	// as "other".
	methodLabels map[string]bool

	// pinging is the health check's ping in flight, nil when none is.
	pingMu  sync.Mutex
	pinging *pingCall

	// pages recycles the buffers search pages are written into (*[]byte). A
	// page is the largest allocation of a search
	// (docs/performance.md, "HTTP: where a request's time goes"), and bytes
	// allocated are what set how often the collector runs.
	pages sync.Pool
}

// NewServer wires the route table over store, hashing passwords with
// hasher.
func NewServer(store Store, hasher *auth.Hasher, cfg Config) *Server {
	s := &Server{
		store:    store,
		hasher:   hasher,
		tokenTTL: cfg.TokenTTL,
		maxBody:  cfg.MaxBodyBytes,
		log:      cfg.Logger,
	}
	if s.tokenTTL <= 0 {
		s.tokenTTL = DefaultTokenTTL
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	s.now = now
	shared, _ := store.(SharedLimits)
	s.guard = newGuard(cfg.Limits, shared, now)
	s.streams = stream.New(store, store, cfg.Streams, now, s.log)
	s.metrics = cfg.Metrics
	s.version, s.public = cfg.Version, strings.TrimSuffix(cfg.PublicURL, "/")
	s.backgroundCtx, s.cancelBackground = context.WithCancel(context.Background())
	s.push.cfg = cfg.Push
	switch {
	case cfg.Mailer != nil && s.public == "":
		// main refuses to start so; a test that forgets is told.
		s.log.Error("no e-mail is sent: links in e-mails need the public URL, never a request's Host header")
	case cfg.Mailer != nil:
		s.mailer, s.resetsMailing = cfg.Mailer, make(chan struct{}, maxResetsMailing)
	}
	s.settings.flags = liveSettings{registration: cfg.Registration, writes: s.guard.writeRate()}
	if s.settings.flags.registration == "" {
		s.settings.flags.registration = RegistrationOpen
	}
	flags := s.settings.flags
	s.settings.live.Store(&flags)

	rt := httprouter.New()
	// An API answers the path it was asked, never a redirect to a guess.
	rt.RedirectTrailingSlash = false
	rt.RedirectFixedPath = false
	rt.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, routeNotFound(r))
	})
	routes := s.routes()
	s.methodLabels = methodLabels(routes)
	statics := staticsBesideWildcards(routes)
	rt.MethodNotAllowed = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// httprouter has set Allow already, to the wildcard route's methods
		// when the path is a static route beside one.
		if byMethod, ok := statics[r.URL.Path]; ok {
			w.Header().Set("Allow", allowHeader(byMethod))
		}
		s.writeError(w, r, methodNotAllowed(r))
	})
	rt.PanicHandler = func(w http.ResponseWriter, r *http.Request, v any) {
		if v == http.ErrAbortHandler {
			panic(v) // a handler cutting its connection on purpose: net/http's job
		}
		s.log.ErrorContext(r.Context(), "panic", "method", r.Method, "path", r.URL.Path,
			"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		s.writeError(w, r, fmt.Errorf("panic: %v", v))
	}
	for _, r := range routes {
		if statics[r.path] != nil {
			continue // the wildcard route beside it serves it
		}
		h := s.wrap(r)
		if dir, last := path.Split(r.path); strings.HasPrefix(last, ":") {
			h = s.dispatchStatics(dir, r.method, statics, h)
		}
		rt.Handle(r.method, r.path, h)
		if r.method == http.MethodGet {
			// RFC 9110 requires HEAD wherever GET is served; net/http drops
			// the body, so the same handler answers both.
			rt.Handle(http.MethodHead, r.path, h)
		}
	}
	s.router = rt
	return s
}

// httprouter cannot hold a static last segment beside a wildcard one
// (/api/messages/stream next to /api/messages/:id). Such a static route is
// registered through the wildcard route instead: its handler hands the
// request over when the wildcard's value is the static segment, so the
// route table still lists every route as what it is.

// staticsBesideWildcards returns the static routes whose path differs
// from a wildcard route's only in its last segment, by path and method.
func staticsBesideWildcards(routes []route) map[string]map[string]route {
	wildcardDirs := make(map[string]bool)
	for _, r := range routes {
		if dir, last := path.Split(r.path); strings.HasPrefix(last, ":") {
			wildcardDirs[dir] = true
		}
	}
	statics := make(map[string]map[string]route)
	for _, r := range routes {
		dir, last := path.Split(r.path)
		if !wildcardDirs[dir] || last == "" || strings.HasPrefix(last, ":") {
			continue
		}
		if statics[r.path] == nil {
			statics[r.path] = make(map[string]route)
		}
		statics[r.path][r.method] = r
	}
	return statics
}

// dispatchStatics wraps the handler of the method's wildcard route in
// directory dir: a value naming a static route beside it is served by that
// route, or refused with 405 when the static route takes other methods.
func (s *Server) dispatchStatics(dir, method string, statics map[string]map[string]route, wildcard httprouter.Handle) httprouter.Handle {
	handlers := make(map[string]httprouter.Handle)
	for p, byMethod := range statics {
		if r, ok := byMethod[method]; ok && path.Dir(p)+"/" == dir {
			handlers[p] = s.wrap(r)
		}
	}
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if len(ps) > 0 {
			p := dir + ps[len(ps)-1].Value
			if h, ok := handlers[p]; ok {
				h(w, r, ps[:len(ps)-1])
				return
			}
			if byMethod, ok := statics[p]; ok {
				w.Header().Set("Allow", allowHeader(byMethod))
				s.writeError(w, r, methodNotAllowed(r))
				return
			}
		}
		wildcard(w, r, ps)
	}
}

// allowHeader lists the methods of a path as httprouter does: sorted, with
// HEAD beside GET and OPTIONS, which it answers everywhere.
func allowHeader(byMethod map[string]route) string {
	methods := []string{http.MethodOptions}
	for m := range byMethod {
		methods = append(methods, m)
		if m == http.MethodGet {
			methods = append(methods, http.MethodHead)
		}
	}
	slices.Sort(methods)
	return strings.Join(methods, ", ")
}

// StopBackground cancels the work requests left running after their
// answer and waits for it to end: called once the server has stopped
// taking requests, before the store closes. A reset link being made then
// is not sent; its requester asks again.
func (s *Server) StopBackground() {
	s.cancelBackground()
	s.background.Wait()
}

// CloseStreams ends every live stream, each with a hint to reconnect a
// little later, and refuses new ones; it waits a few seconds at most for
// the hints to go out. Streams run on connections taken from net/http,
// which http.Server.Shutdown neither waits for nor closes: call this
// before it.
func (s *Server) CloseStreams() { s.streams.Close() }

// access says who may call a route.
type access int

const (
	public        access = iota // anyone
	authenticated               // any valid bearer token
	roleUser                    // a valid bearer token whose user has model.RoleUser
	roleAdmin                   // a valid bearer token of an administrator
	// bearer: a well-formed bearer token, which the handler's store call
	// checks in the same read transaction as the data it guards — one
	// transaction instead of two on the hottest read paths.
	bearer
)

// handler is the shape of every endpoint: errors are returned, and written
// as problem documents in one place.
type handler func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) error

type route struct {
	method, path string
	access       access
	handle       handler
}

// routes is the one route table: everything Herald answers is listed here.
func (s *Server) routes() []route {
	docs := newDocsUI()
	webClient := webRoutes{web.New()}
	return []route{
		{http.MethodGet, "/api/info", public, s.info},
		{http.MethodPost, "/api/register", public, s.registerAccount},
		{http.MethodPost, "/api/login", public, s.login},
		{http.MethodPost, "/api/password-reset", public, s.resetPassword},
		{http.MethodPost, "/api/password-reset/request", public, s.requestPasswordReset},
		{http.MethodGet, "/api/me", authenticated, s.me},
		{http.MethodPost, "/api/logout", authenticated, s.logout},
		{http.MethodPatch, "/api/me", authenticated, s.updateProfile},
		{http.MethodDelete, "/api/me", authenticated, s.deleteAccount},
		{http.MethodPost, "/api/me/password", authenticated, s.changePassword},
		{http.MethodGet, "/api/me/tokens", authenticated, s.listTokens},
		{http.MethodDelete, "/api/me/tokens", authenticated, s.revokeAllTokens},
		{http.MethodDelete, "/api/me/tokens/:id", authenticated, s.revokeToken},
		{http.MethodGet, "/api/me/notifications", bearer, s.listNotifications},
		{http.MethodPost, "/api/me/notifications/read", authenticated, s.markNotificationsRead},
		{http.MethodGet, "/api/push/key", authenticated, s.pushKey},
		{http.MethodPost, "/api/me/push-subscriptions", authenticated, s.createPushSubscription},
		{http.MethodGet, "/api/me/push-subscriptions", authenticated, s.listPushSubscriptions},
		{http.MethodDelete, "/api/me/push-subscriptions/:id", authenticated, s.deletePushSubscription},

		{http.MethodGet, "/api/users/:handle", bearer, s.profile},
		{http.MethodPost, "/api/message", roleUser, s.createMessage}, // the original API's singular path, kept for its clients
		{http.MethodPost, "/api/messages", roleUser, s.createMessage},
		{http.MethodGet, "/api/messages", bearer, s.searchMessages},
		{http.MethodGet, "/api/messages/stream", bearer, s.streamMessages},
		{http.MethodGet, "/api/messages/:id", bearer, s.getMessage},
		{http.MethodGet, "/api/messages/:id/replies", bearer, s.listReplies},
		{http.MethodPatch, "/api/messages/:id", authenticated, s.updateMessage},
		{http.MethodDelete, "/api/messages/:id", authenticated, s.deleteMessage},

		{http.MethodGet, "/api/admin/users", roleAdmin, s.listAccounts},
		{http.MethodGet, "/api/admin/users/:id", roleAdmin, s.getAccount},
		{http.MethodPatch, "/api/admin/users/:id", roleAdmin, s.updateAccount},
		{http.MethodDelete, "/api/admin/users/:id", roleAdmin, s.removeAccount},
		{http.MethodDelete, "/api/admin/users/:id/messages", roleAdmin, s.removeMessages},
		{http.MethodPost, "/api/admin/users/:id/password-reset", roleAdmin, s.createPasswordReset},
		{http.MethodPost, "/api/admin/invites", roleAdmin, s.createInvite},
		{http.MethodGet, "/api/admin/invites", roleAdmin, s.listInvites},
		{http.MethodDelete, "/api/admin/invites/:id", roleAdmin, s.revokeInvite},
		{http.MethodGet, "/api/admin/audit", roleAdmin, s.auditLog},
		{http.MethodGet, "/api/admin/backup", roleAdmin, s.backup},
		{http.MethodGet, "/api/admin/settings", roleAdmin, s.getSettings},
		{http.MethodPatch, "/api/admin/settings", roleAdmin, s.updateSettings},

		{http.MethodGet, "/healthz", public, s.health},

		{http.MethodGet, docsJSONPath, public, serveOpenAPI},
		{http.MethodGet, docsPagePath, public, docs.page},
		{http.MethodGet, docsPagePath + "/:asset", public, docs.asset},

		{http.MethodGet, webIndexPath, public, webClient.page},
		{http.MethodGet, webAssetsPath, public, webClient.asset},
		{http.MethodGet, webManifestPath, public, webClient.manifest},
		{http.MethodGet, webWorkerPath, public, webClient.worker},
	}
}

// wrap adds authentication for the route's access level and writes any
// returned error. The caller goes into the request's requestInfo, which
// ServeHTTP has put in the context: no second context copy.
func (s *Server) wrap(rt route) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		info := requestInfoFrom(r.Context())
		info.route = rt.path
		if err := refuseUntakenKey(r, rt); err != nil {
			s.writeError(w, r, err)
			return
		}
		switch rt.access {
		case public:
		case bearer:
			hash, err := presentedToken(r)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			info.caller.tokenHash = hash
		default:
			err := s.authenticate(r, &info.caller)
			switch {
			case err != nil:
			case rt.access == roleUser && !info.caller.user.HasRole(model.RoleUser):
				err = missingRole(model.RoleUser)
			case rt.access == roleAdmin && !info.caller.user.HasRole(model.RoleAdmin):
				err = missingRole(model.RoleAdmin)
			}
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			info.userID = info.caller.user.ID
		}
		// After the access checks: who may not call a route learns only
		// that, whatever they sent.
		if err := refuseBody(r, rt); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := rt.handle(w, r, ps); err != nil {
			s.writeError(w, r, err)
		}
	}
}

// principal is the authenticated caller of a request. On bearer routes
// user is nil until the handler's store call has checked the token; the
// handler reports it with noteCaller.
type principal struct {
	user      *model.User
	tokenHash model.TokenHash
}

// noteCaller records the user a bearer route's store call resolved, for
// the handler and the access log.
func noteCaller(r *http.Request, u *model.User) {
	info := requestInfoFrom(r.Context())
	info.caller.user = u
	info.userID = u.ID
}

// caller returns the authenticated principal. It is only called from
// handlers of non-public routes, where wrap has filled it in.
func caller(r *http.Request) *principal {
	return &requestInfoFrom(r.Context()).caller
}

// authenticate resolves the request's bearer token to its user, into p.
func (s *Server) authenticate(r *http.Request, p *principal) error {
	hash, err := presentedToken(r)
	if err != nil {
		return err
	}
	u, _, err := s.store.Authenticate(r.Context(), hash)
	if err != nil {
		return err
	}
	*p = principal{user: u, tokenHash: hash}
	return nil
}

// presentedToken reads the request's bearer token and returns its hash,
// the only form the store knows. A missing token and a malformed one are
// refused here, before any storage is touched.
func presentedToken(r *http.Request) (model.TokenHash, error) {
	token, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		return model.TokenHash{}, missingToken()
	}
	if !auth.WellFormedToken(token) {
		return model.TokenHash{}, &model.Error{Kind: model.ErrUnauthorized, Detail: "the bearer token is malformed"}
	}
	return model.TokenHash(auth.HashToken(token)), nil
}

// bearerToken extracts the token from an Authorization header value. The
// scheme name is case-insensitive (RFC 7235); anything else is no token.
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// ServeHTTP logs each request and adds headers every response carries.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	info := &requestInfo{}
	r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK, ctx: r.Context()}
	h := rec.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	s.router.ServeHTTP(rec, r)
	s.observe(r, info.route, rec.status, time.Since(start))
	// Only the path is logged: never the query, headers or body, which may
	// carry search terms, tokens or passwords.
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", rec.status),
		slog.Int64("bytes", rec.bytes),
		slog.Duration("duration", time.Since(start)),
		slog.Uint64("user", info.userID),
		slog.String("remote", r.RemoteAddr),
	)
}

// requestInfo is what a request's layers tell each other: the caller for
// handlers, the user and route for the access log and the metrics.
type requestInfo struct {
	caller principal
	userID uint64
	route  string // the route table's pattern; "" when no route matched
}

// requestInfoKey is the context key for *requestInfo; unexported so no
// other package can forge or read it.
type requestInfoKey struct{}

// requestInfoFrom returns the request's requestInfo. The router is only
// ever reached through ServeHTTP, which puts one in every context.
func requestInfoFrom(ctx context.Context) *requestInfo {
	return ctx.Value(requestInfoKey{}).(*requestInfo)
}

// statusRecorder remembers the status and size of a response for the log.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
	ctx    context.Context // the request's, which knows its connection
}

func (rec *statusRecorder) WriteHeader(status int) {
	if !rec.wrote {
		rec.status, rec.wrote = status, true
	}
	rec.ResponseWriter.WriteHeader(status)
}

func (rec *statusRecorder) Write(b []byte) (int, error) {
	rec.wrote = true
	n, err := rec.ResponseWriter.Write(b)
	rec.bytes += int64(n)
	return n, err
}

// FlushError sends everything written so far, including a write the
// connection holds back to send with the next one (CoalesceWrites): a
// handler that flushes wants its bytes on the wire now.
// http.ResponseController.Flush calls it.
func (rec *statusRecorder) FlushError() error {
	rec.wrote = true
	if err := http.NewResponseController(rec.ResponseWriter).Flush(); err != nil {
		return err
	}
	return netquirk.Release(rec.ctx)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (rec *statusRecorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

// health answers 200 while the database can serve a read, and says when
// writes are failing for lack of storage: reads, logins and streams go on
// then, so a liveness check must not restart the server, but whoever
// watches it should know. It answers within healthWait and a moment,
// whatever the database does: 503 when the database does not answer.
func (s *Server) health(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if err := s.ping(r.Context()); err != nil {
		switch {
		case err == errNotAnswering:
			s.log.WarnContext(r.Context(), "health check: the database did not answer", "within", healthWait)
			return err
		case r.Context().Err() != nil:
			return err // the client left
		}
		s.log.WarnContext(r.Context(), "health check failed", "err", err)
		return errUnavailable
	}
	if err := s.store.WritesFailing(r.Context()); err != nil {
		s.writeJSON(w, r, http.StatusOK, map[string]string{
			"status": "degraded",
			"writes": "failing",
			"detail": clientDetail(err, "writes are failing"),
		})
		return nil
	}
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

// healthWait is how long a health check waits for the database's answer,
// so that /healthz answers within 2 seconds whatever the database does.
const healthWait = 1500 * time.Millisecond

// pingCall is a ping of the store's in flight, and its answer once done
// is closed.
type pingCall struct {
	done chan struct{}
	err  error
}

// ping asks the store whether it can serve, and returns its answer, or
// errNotAnswering when none came within healthWait, or the store gave up
// itself at the end of its context, which healthWait bounds. The store's
// ping runs on a goroutine of its own, so that a store that does not
// honour the context (a disk that hangs under bbolt's read) cannot hold
// the health check; and one ping runs at a time, shared by the checks
// that come while it runs, so a database that hangs holds one goroutine
// and one connection, not one a check.
func (s *Server) ping(ctx context.Context) error {
	s.pingMu.Lock()
	c := s.pinging
	if c == nil {
		c = &pingCall{done: make(chan struct{})}
		s.pinging = c
		go func() {
			pctx, cancel := context.WithTimeout(context.Background(), healthWait)
			c.err = s.store.Ping(pctx)
			cancel()
			s.pingMu.Lock()
			s.pinging = nil
			s.pingMu.Unlock()
			close(c.done)
		}()
	}
	s.pingMu.Unlock()
	timer := time.NewTimer(healthWait)
	defer timer.Stop()
	select {
	case <-c.done:
		if errors.Is(c.err, context.DeadlineExceeded) {
			return errNotAnswering // the store's own bound came first
		}
		return c.err
	case <-timer.C:
		return errNotAnswering
	case <-ctx.Done():
		return ctx.Err()
	}
}
