package http

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"

	"herald/auth"
	"herald/model"
)

// Settings an administrator changes at run time (GET and PATCH
// /api/admin/settings). They live in the store, so every instance follows
// them: the update is logged as model.SettingsChanged, whose commit wakes
// every instance's FollowSettings, which reads the settings again. A
// setting the database holds no value for takes the server's flag
// (Config.Registration, Limits.WritesPerAccount).

var settingsFields = fieldSpec{
	writable:   model.SettingNames,
	mergePatch: true,
}

// settingsJSON is the settings in force, as GET and PATCH answer them.
type settingsJSON struct {
	Registration     Registration `json:"registration"`
	WritesPerAccount string       `json:"writesPerAccount"`
}

// liveSettings are the settings this server applies: the database's
// values where it holds them, the flags' elsewhere.
type liveSettings struct {
	registration Registration
	writes       auth.Rate
}

// settingsState is what Server keeps of the settings.
type settingsState struct {
	flags liveSettings                 // the values for a database that holds none
	live  atomic.Pointer[liveSettings] // in force
	// mu is held from a read or a change of the stored settings to their
	// being put in force, so a read made before a change is never put in
	// force after it.
	mu sync.Mutex
}

// refreshSettings reads the settings the database holds and puts them in
// force.
func (s *Server) refreshSettings(ctx context.Context) error {
	s.settings.mu.Lock()
	defer s.settings.mu.Unlock()
	st, err := s.store.Settings(ctx)
	if err != nil {
		return err
	}
	s.applySettings(ctx, st)
	return nil
}

// applySettings puts the database's settings st in force, the flags'
// values for those it lacks. A stored value this server cannot read (the
// store only keeps what the API checked) is logged and left out. The
// caller holds s.settings.mu.
func (s *Server) applySettings(ctx context.Context, st model.Settings) {
	next := s.settings.flags
	if v, ok := st[model.SettingRegistration]; ok {
		if m, err := ParseRegistration(v); err == nil {
			next.registration = m
		} else {
			s.log.WarnContext(ctx, "a stored setting cannot be read; the flag's value applies", "setting", model.SettingRegistration, "value", v)
		}
	}
	if v, ok := st[model.SettingWritesPerAccount]; ok {
		if r, err := auth.ParseRate(v); err == nil {
			next.writes = r
		} else {
			s.log.WarnContext(ctx, "a stored setting cannot be read; the flag's value applies", "setting", model.SettingWritesPerAccount, "value", v)
		}
	}
	if cur := s.settings.live.Load(); cur == nil || *cur != next {
		if cur != nil {
			s.log.InfoContext(ctx, "settings in force", "registration", next.registration, "writes_per_account", next.writes.String())
		}
		s.settings.live.Store(&next)
		s.guard.setWriteRate(next.writes)
	}
}

func (s *Server) settingsInForce() settingsJSON {
	live := s.settings.live.Load()
	return settingsJSON{Registration: live.registration, WritesPerAccount: live.writes.String()}
}

// settingsWait is how long FollowSettings waits between two reads of the
// settings, and before trying again after a failed read: every commit
// wakes it, and a busy server commits far more often than settings
// change.
const settingsWait = time.Second

// FollowSettings reads the settings the database holds and puts them in
// force, then follows them until ctx ends: each commit to the change log
// (a settings change is one, on whatever instance it is made) wakes it to
// read them again, at most once every settingsWait. Reading the settings
// is one small read; reading the log to find the settings changes among
// the messages' would cost more on a busy server. It returns once the
// first read is done, with its error (a server that cannot read its
// settings must not start with the flags' in their place), and a channel
// closed once the following has stopped after ctx ended: wait for it
// before closing the store.
func (s *Server) FollowSettings(ctx context.Context) (stopped <-chan struct{}, err error) {
	head, changed, err := s.store.ChangeHead(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.refreshSettings(ctx); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.followSettings(ctx, head, changed)
	}()
	return done, nil
}

func (s *Server) followSettings(ctx context.Context, seen uint64, changed <-chan struct{}) {
	pause := time.NewTimer(settingsWait)
	defer pause.Stop()
	wait := func() bool {
		pause.Reset(settingsWait)
		select {
		case <-pause.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	retry := false // the last read failed: read again without waiting for a commit
	for {
		if !retry {
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
		retry = false
		head, next, err := s.store.ChangeHead(ctx)
		if err != nil {
			retry = true
			if !wait() {
				return
			}
			continue
		}
		changed = next
		if head == seen {
			continue
		}
		if err := s.refreshSettings(ctx); err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "reading the settings; trying again", "err", err)
			}
			retry = true
		} else {
			seen = head
		}
		if !wait() {
			return
		}
	}
}

// getSettings answers GET /api/admin/settings: the settings in force, as
// the database holds them now.
func (s *Server) getSettings(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	if err := s.refreshSettings(r.Context()); err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, s.settingsInForce())
	return nil
}

// updateSettings answers PATCH /api/admin/settings: the fields given are
// checked, stored, audited and put in force on this instance at once (the
// others follow within settingsWait). Errors: 422 naming a field whose
// value is not one the setting takes.
func (s *Server) updateSettings(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	f, err := decodeBody(w, r, s.maxBody, settingsFields)
	if err != nil {
		return err
	}
	changes, err := readSettings(f)
	if err != nil {
		return err
	}
	s.settings.mu.Lock()
	st, err := s.store.UpdateSettings(r.Context(), adminBy(r), changes)
	if err == nil {
		s.applySettings(r.Context(), st)
	}
	s.settings.mu.Unlock()
	if err != nil {
		return err
	}
	s.writeJSON(w, r, http.StatusOK, s.settingsInForce())
	return nil
}

// readSettings checks the settings a body gives, each written as the
// store keeps it (a rate as auth.Rate writes it). Errors: 422 naming each
// field at fault.
func readSettings(f fields) (model.Settings, error) {
	out := make(model.Settings)
	var invalid model.ValidationError
	if v, ok := f[model.SettingRegistration]; ok {
		if m, err := ParseRegistration(f.str(model.SettingRegistration)); v == nil || err != nil {
			invalid.Add(model.SettingRegistration, "must be one of open, invite, closed")
		} else {
			out[model.SettingRegistration] = string(m)
		}
	}
	if v, ok := f[model.SettingWritesPerAccount]; ok {
		r, err := auth.ParseRate(strings.TrimSpace(f.str(model.SettingWritesPerAccount)))
		switch {
		case v == nil || err != nil:
			invalid.Add(model.SettingWritesPerAccount, "must be BURST/INTERVAL, such as 60/5s: a burst of at least 1 and a positive interval")
		case r.Burst > maxWriteBurst || r.Every > maxWriteEvery:
			invalid.Add(model.SettingWritesPerAccount, "must have a burst of at most 1000000 and an interval of at most 24h")
		default:
			out[model.SettingWritesPerAccount] = r.String()
		}
	}
	return out, invalid.Err()
}

// Bounds of the write limit an administrator may set: beyond them a limit
// limits nothing, or locks an account out for days, and is surely a slip.
const (
	maxWriteBurst = 1_000_000
	maxWriteEvery = 24 * time.Hour
)
