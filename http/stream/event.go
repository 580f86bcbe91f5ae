package stream

import (
	"net"
	"slices"
	"strconv"
	"sync/atomic"

	"herald/http/apijson"
	"herald/model"
)

// event is one change, rendered once for every stream that sends it.
type event struct {
	seq  uint64
	kind model.ChangeKind
	// revoked, when not zero, is the account whose tokens a TokensRevoked
	// change concerns: an event no stream sends, with no text, as is a
	// SettingsChanged one's.
	revoked uint64
	// recipient is the account a NotificationCreated event notifies:
	// only its streams are sent the event.
	recipient uint64
	message   uint64 // the message's ID, in the events of messages
	owner     string // model.EmailKey of the message's owner; "" when unknown
	// author is the owner's account ID in an event that shows a message
	// (created, updated); zero in a deletion, which shows only its ID.
	author uint64
	// terms are the message's words after the change; a deletion's are
	// the words of the message it took away. nil when unknown: a deletion
	// of a message whose content the log no longer held when it was
	// rendered, which passes every filter by words.
	terms map[string]struct{}
	// before are an update's words before it, nil when unknown (passing
	// every filter by words), so a client showing a filtered list learns
	// of a message that left it.
	before map[string]struct{}
	text   []byte // id:, event: and data: lines, blank line included; nil for an event nobody is sent
	data   int    // where the data line's JSON starts in text
	// block holds text and, back to back, the texts of the events
	// rendered with it, so a stream sent a run of them gets one piece
	// (see appendPiece) rather than a piece per event.
	block []byte
	off   int // where text starts in block
	size  int // memory it holds, roughly
	// next is the message's next event, once one is rendered after this
	// one in the same history: this one is then out of date, and is sent
	// as the message is now (see current).
	next atomic.Pointer[event]
}

// shows reports whether ev shows a message: a creation or an update of one
// that is still there when it was rendered.
func (ev *event) shows() bool {
	return ev.text != nil && (ev.kind == model.MessageCreated || ev.kind == model.MessageUpdated)
}

// current is the newest event of ev's message in its history, ev itself
// when none came after it.
func (ev *event) current() *event {
	for {
		next := ev.next.Load()
		if next == nil {
			return ev
		}
		ev = next
	}
}

// history links each event of a message to the one before it, so an
// update knows the words the message had, a deletion the words it took
// away, and an out-of-date event what the message is now. The hub's window
// keeps one for as long as it holds the events; a replay keeps one for
// its batch.
type history map[uint64]*event // message ID → its newest event

// forget drops ev from h when it is its message's newest event.
func (h history) forget(ev *event) {
	if ev.message != 0 && h[ev.message] == ev {
		delete(h, ev.message)
	}
}

// renderEvents renders changes, consecutive in the log, into events whose
// texts share blocks of about eventBlockBytes, linking each to the events
// of its message in h.
func renderEvents(chs []*model.Change, h history) []*event {
	evs := make([]*event, 0, len(chs))
	for len(chs) > 0 {
		n, room := 0, 0
		for ; n < len(chs); n++ {
			r := eventRoom(chs[n])
			if n > 0 && room+r > eventBlockBytes {
				break
			}
			room += r
		}
		evs = renderBlock(evs, chs[:n], room, h)
		chs = chs[n:]
	}
	return evs
}

// eventBlockBytes bounds a block of rendered events: one event left in
// the hub's window keeps its whole block, so the window's byte limit is
// exceeded by at most about this much.
const eventBlockBytes = 64 << 10

// eventRoom is about the bytes ch's event renders to.
func eventRoom(ch *model.Change) int {
	if ch.Kind.Internal() || ch.Gone {
		return 0
	}
	return 160 + model.ChangeBytes(ch)
}

// renderBlock appends to evs the events of chs, their texts back to back
// in one block of capacity room (more if they need it).
func renderBlock(evs []*event, chs []*model.Change, room int, h history) []*event {
	first := len(evs)
	block := make([]byte, 0, room)
	for _, ch := range chs {
		if ch.Kind.Internal() {
			// No text: nobody is sent it. A revocation names its account.
			evs = append(evs, &event{seq: ch.Seq, kind: ch.Kind, revoked: ch.UserID, off: len(block)})
			continue
		}
		if ch.Kind == model.NotificationCreated {
			// Not an event of its message: it stands alone, as it was
			// when rendered, and goes to its recipient only.
			ev := &event{seq: ch.Seq, kind: ch.Kind, recipient: ch.UserID, off: len(block)}
			if !ch.Gone && ch.Notification != nil {
				block = appendEventText(block, ch, &ev.data)
			}
			evs = append(evs, ev)
			continue
		}
		ev := &event{seq: ch.Seq, kind: ch.Kind, message: ch.Message.ID, owner: model.EmailKey(ch.Message.OwnerEmail), off: len(block)}
		prev := h[ev.message]
		switch {
		case ch.Gone:
			// Deleted since: nothing to show, and its deletion follows.
		case ch.Kind == model.MessageDeleted:
			if prev != nil {
				ev.terms = prev.terms
			}
			block = appendEventText(block, ch, &ev.data)
		default:
			ev.author = ch.Message.OwnerID
			ev.terms = model.ContentTerms(ch.Message.Content)
			if ch.Kind == model.MessageUpdated && prev != nil {
				ev.before = prev.terms
			}
			block = appendEventText(block, ch, &ev.data)
		}
		if prev != nil {
			prev.next.Store(ev)
		}
		h[ev.message] = ev
		evs = append(evs, ev)
	}
	// A block that grew past its room (content JSON escapes, a control
	// character six bytes) keeps its doubled capacity for as long as one
	// of its events is held: trimmed to its length, the window's byte
	// count is what it holds.
	if cap(block) > len(block)+len(block)/8 {
		block = slices.Clip(slices.Clone(block))
	}
	// Offsets hold in the final block wherever append moved it.
	for i, ev := range evs[first:] {
		end := len(block)
		if first+i+1 < len(evs) {
			end = evs[first+i+1].off
		}
		ev.block = block
		if end > ev.off {
			ev.text = block[ev.off:end:end]
			ev.data -= ev.off
		}
		// The term sets cost about what the text they came from does.
		ev.size = 2*len(ev.text) + 64
	}
	return evs
}

// appendEventText appends the lines of ch's event, and sets data to where
// its JSON starts in b.
func appendEventText(b []byte, ch *model.Change, data *int) []byte {
	b = appendEventHead(b, ch.Seq, ch.Kind)
	*data = len(b)
	switch ch.Kind {
	case model.NotificationCreated:
		b = apijson.AppendNotification(b, ch.Notification)
	case model.MessageDeleted:
		b = append(b, `{"id":`...)
		b = strconv.AppendUint(b, ch.Message.ID, 10)
		b = append(b, '}')
	default:
		// JSON escapes every line break, so the payload is one data: line.
		b = apijson.AppendMessage(b, &ch.Message)
	}
	return append(b, "\n\n"...)
}

// appendEventHead appends an event's id: and event: lines and the start of
// its data: line.
func appendEventHead(b []byte, seq uint64, kind model.ChangeKind) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, kind.String()...)
	return append(b, "\ndata: "...)
}

// appendPiece adds ev's text to the pieces of a write, lengthening the
// last piece instead when the text follows it in the same block. A piece
// keeps its block's capacity so the next text can be found after it; the
// pieces are only written, never appended to.
func appendPiece(pieces net.Buffers, ev *event) net.Buffers {
	if n := len(pieces); n > 0 {
		last := pieces[n-1]
		if after := last[len(last):cap(last)]; len(after) >= len(ev.text) && &after[0] == &ev.text[0] {
			pieces[n-1] = last[:len(last)+len(ev.text)]
			return pieces
		}
	}
	return append(pieces, ev.block[ev.off:ev.off+len(ev.text)])
}

// appendAsNow adds to the pieces of a write out-of-date event ev as the
// message is now, cur being its newest event: ev's position and kind, and
// cur's message. The head is written into its own small piece; the
// message is cur's text, shared.
func appendAsNow(pieces net.Buffers, ev, cur *event) net.Buffers {
	head := appendEventHead(make([]byte, 0, 48), ev.seq, ev.kind)
	return append(pieces, head, cur.text[cur.data:])
}
