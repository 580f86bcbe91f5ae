package stream

import (
	"net"
	"strconv"

	"herald/http/apijson"
	"herald/model"
)

// event is one change, rendered once for every stream that sends it.
type event struct {
	seq uint64
	// revoked, when not zero, is the account whose tokens a TokensRevoked
	// change concerns: an event no stream sends, with no text.
	revoked uint64
	owner   string // model.EmailKey of the message's owner
	// author is the owner's account ID in an event that shows a message
	// (created, updated); zero in a deletion, which shows only its ID.
	author uint64
	terms  map[string]struct{} // the message's words after the change
	before map[string]struct{} // and before it, for an update
	text   []byte              // id:, event: and data: lines, blank line included
	// block holds text and, back to back, the texts of the events
	// rendered with it, so a stream sent a run of them gets one piece
	// (see appendPiece) rather than a piece per event.
	block []byte
	off   int // where text starts in block
	size  int // memory it holds, roughly
}

// renderEvents renders changes, consecutive in the log, into events whose
// texts share blocks of about eventBlockBytes.
func renderEvents(chs []*model.Change) []*event {
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
		evs = renderBlock(evs, chs[:n], room)
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
	if ch.Kind.Internal() {
		return 0
	}
	return 160 + len(ch.Message.Content) + len(ch.Message.OwnerEmail)
}

// renderBlock appends to evs the events of chs, their texts back to back
// in one block of capacity room (more if they need it).
func renderBlock(evs []*event, chs []*model.Change, room int) []*event {
	first := len(evs)
	block := make([]byte, 0, room)
	for _, ch := range chs {
		if ch.Kind == model.TokensRevoked {
			evs = append(evs, &event{seq: ch.Seq, revoked: ch.UserID, off: len(block)})
			continue
		}
		ev := &event{seq: ch.Seq, owner: model.EmailKey(ch.Message.OwnerEmail), terms: model.ContentTerms(ch.Message.Content), off: len(block)}
		if ch.Kind != model.MessageDeleted {
			ev.author = ch.Message.OwnerID
		}
		if ch.Kind == model.MessageUpdated {
			ev.before = model.ContentTerms(ch.Before)
		}
		block = appendEventText(block, ch)
		evs = append(evs, ev)
	}
	// Offsets hold in the final block wherever append moved it.
	for i, ev := range evs[first:] {
		end := len(block)
		if first+i+1 < len(evs) {
			end = evs[first+i+1].off
		}
		ev.block = block
		ev.text = block[ev.off:end:end]
		// The term sets cost about what the text they came from does.
		ev.size = 2*len(ev.text) + len(chs[i].Before)
	}
	return evs
}

// appendEventText appends the lines of ch's event.
func appendEventText(b []byte, ch *model.Change) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, ch.Seq, 10)
	b = append(b, "\nevent: "...)
	b = append(b, ch.Kind.String()...)
	b = append(b, "\ndata: "...)
	if ch.Kind == model.MessageDeleted {
		b = append(b, `{"id":`...)
		b = strconv.AppendUint(b, ch.Message.ID, 10)
		b = append(b, '}')
	} else {
		// JSON escapes every line break, so the payload is one data: line.
		b = apijson.AppendMessage(b, &ch.Message)
	}
	return append(b, "\n\n"...)
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
