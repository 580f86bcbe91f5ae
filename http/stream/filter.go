package stream

import (
	"net"

	"herald/model"
)

// Filter is what a stream asked for: search's q and owner.
type Filter struct {
	Terms []string // the words every message sent must hold (model.Terms)
	Owner string   // the owner's e-mail; "" for everyone
}

// filter is a Filter as a round applies it, for the stream of account
// user, which alone is sent user's notifications, whatever the filter.
type filter struct {
	terms []string
	owner string // model.EmailKey of Filter.Owner; "" for everyone
	user  uint64
}

func (f Filter) compile(user uint64) filter {
	c := filter{terms: f.Terms, user: user}
	if f.Owner != "" {
		c.owner = model.EmailKey(f.Owner)
	}
	return c
}

// passes reports whether a stream with this filter sends ev, as it was
// rendered. An update passes when the message matched before it or
// matches after it, so a client showing a filtered list learns of a
// message that left it; a deletion passes when the message it took away
// matched. Words that are unknown (an update's before, or a deletion's,
// when the log no longer held the message's earlier content) pass every
// filter by words: a client told of a change to a message it never showed
// ignores it, while one not told keeps showing what is gone. An event whose
// owner is unknown passes any owner: only the deletions of an account
// purge that a release before the change log began lack one. An event
// without text (a revocation, or the change of a message since deleted)
// passes no filter: it is never sent.
func (f *filter) passes(ev *event) bool {
	if ev.text == nil || f.owner != "" && ev.owner != "" && ev.owner != f.owner {
		return false
	}
	switch ev.kind {
	case model.MessageCreated:
		return model.HasAllTerms(ev.terms, f.terms)
	case model.MessageUpdated:
		return model.HasAllTerms(ev.terms, f.terms) || ev.before == nil || model.HasAllTerms(ev.before, f.terms)
	default:
		return ev.terms == nil || model.HasAllTerms(ev.terms, f.terms)
	}
}

// passesAsNow reports whether a stream with this filter sends out-of-date
// event ev as the message is now, cur being its newest event (one that
// shows the message): an update also when the message matched before it.
func (f *filter) passesAsNow(ev, cur *event) bool {
	if f.owner != "" && ev.owner != "" && ev.owner != f.owner {
		return false
	}
	if model.HasAllTerms(cur.terms, f.terms) {
		return true
	}
	return ev.kind == model.MessageUpdated && (ev.before == nil || model.HasAllTerms(ev.before, f.terms))
}

// sends reports whether a stream with this filter sends ev, and the event
// that has what it shows: ev itself, or, when asNow and ev is out of date,
// the message's newest event, whose message it then shows at ev's
// position. An out-of-date event of a message deleted since is then not
// sent: its deletion is. (A change the log no longer held when it was
// rendered was rendered as the message was then; one of a message deleted
// by then was rendered to nothing.)
//
// A resuming stream's client may hold any earlier version of a message:
// the changes of a message deleted since are not replayed, so a deletion
// replayed passes every filter by words.
func (f *filter) sends(ev *event, asNow bool) (bool, *event) {
	if ev.kind == model.NotificationCreated {
		return ev.text != nil && ev.recipient == f.user, ev
	}
	cur := ev
	if asNow {
		cur = ev.current()
		if ev.kind == model.MessageDeleted && ev.text != nil {
			return f.owner == "" || ev.owner == "" || ev.owner == f.owner, ev
		}
	}
	if cur == ev {
		return f.passes(ev), ev
	}
	return ev.shows() && cur.shows() && f.passesAsNow(ev, cur), cur
}

// gather appends to out the texts of the events of evs that the stream
// sends (see sends), in as few pieces as they lie in (appendPiece), and
// stops before the event that would take the pieces' bytes beyond
// maxBytes, unless it would send nothing. It returns the pieces, their
// bytes, and how many of evs it went through. An event showing a message
// whose author authorsGone says was deleted is not sent.
//
// A stream resuming sends the changes it missed, up to replayedUpTo, each
// as the message is now: it must not show again what was edited away or
// deleted meanwhile. From there it is live, and sends each change as it
// was rendered: what it shows was the message then, and the change that
// followed comes right after it.
func (f *filter) gather(out net.Buffers, evs []*event, maxBytes int, authorsGone map[uint64]bool, replayedUpTo uint64) (net.Buffers, int, int) {
	bytes := 0
	for i, ev := range evs {
		send, cur := f.sends(ev, ev.seq <= replayedUpTo)
		if !send || ev.author != 0 && authorsGone[ev.author] {
			continue
		}
		n := len(cur.text) // about, for one out of date: its head differs
		if bytes > 0 && bytes+n > maxBytes {
			return out, bytes, i
		}
		bytes += n
		if cur == ev {
			out = appendPiece(out, ev)
		} else {
			out = appendAsNow(out, ev, cur)
		}
	}
	return out, bytes, len(evs)
}
