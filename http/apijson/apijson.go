// Package apijson writes the API's messages as JSON by hand: a message, a
// page of them, their timestamps and strings. Messages are the bulk of
// what Herald sends, a search page is up to a hundred of them and every
// live stream event carries one, so the handlers and the stream both write
// them through this package rather than through encoding/json's
// reflection. The output is byte for byte what encoding/json gives for the
// plain struct shapes in the tests (a fuzz test holds them to it).
package apijson

import (
	"encoding/binary"
	"strconv"
	"time"
	"unicode/utf8"

	"herald/model"
)

// TimeLayout is RFC 3339 in UTC with a fixed six-digit fraction: the
// precision stores keep, so a value read back compares equal.
const TimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// AppendTime appends t in TimeLayout, as time.Time.AppendFormat does (a
// test holds them to the same bytes). A page of messages carries 40
// timestamps, and AppendFormat interprets its layout on every call, which
// shows in the server's CPU on GET /api/messages
// (docs/performance.md, "HTTP: where a request's time goes"); this writes
// the one layout directly. Years outside 0–9999, which no stored time has,
// are left to AppendFormat.
func AppendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(b, TimeLayout)
	}
	hour, minute, sec := t.Clock()
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/1000, 6) // truncated, as the layout's .000000 does
	return append(b, 'Z')
}

// appendDigits appends v, which is not negative, as exactly width decimal
// digits.
func appendDigits(b []byte, v, width int) []byte {
	n := len(b) + width
	b = append(b, "000000"[:width]...)
	for i := n - 1; i >= n-width; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}

// AppendMessage appends m in the message_basic shape.
func AppendMessage(b []byte, m *model.Message) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, m.ID, 10)
	b = append(b, `,"content":`...)
	b = AppendString(b, m.Content)
	b = append(b, `,"user":{"id":`...)
	b = strconv.AppendUint(b, m.OwnerID, 10)
	b = append(b, `,"email":`...)
	b = AppendString(b, m.OwnerEmail)
	b = append(b, `,"handle":`...)
	b = AppendString(b, m.OwnerHandle)
	b = append(b, `,"name":`...)
	b = AppendString(b, m.OwnerName)
	b = append(b, `},"createdAt":"`...)
	created := len(b)
	b = AppendTime(b, m.CreatedAt)
	end := len(b)
	b = append(b, `","updatedAt":"`...)
	if m.UpdatedAt.Equal(m.CreatedAt) { // never edited, as most are: copy, do not format again
		b = append(b, b[created:end]...)
	} else {
		b = AppendTime(b, m.UpdatedAt)
	}
	b = append(b, `","replyTo":`...)
	if m.ReplyTo == 0 {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendUint(b, m.ReplyTo, 10)
	}
	b = append(b, `,"replies":`...)
	b = strconv.AppendUint(b, m.Replies, 10)
	b = append(b, `,"mentions":[`...)
	for i, mention := range m.Mentions {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = strconv.AppendUint(b, mention.UserID, 10)
		b = append(b, `,"handle":`...)
		b = AppendString(b, mention.Handle)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// AppendPage appends a search page and the newline encoding/json ends with;
// next is "" on the last page.
func AppendPage(b []byte, msgs []*model.Message, next string) []byte {
	b = append(b, `{"items":[`...)
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendMessage(b, m)
	}
	b = append(b, `],"next":`...)
	if next == "" {
		b = append(b, "null"...)
	} else {
		b = AppendString(b, next)
	}
	return append(b, "}\n"...)
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string the way encoding/json writes
// it without HTML escaping: quotes, backslashes and control characters
// escaped, U+2028 and U+2029 escaped (JavaScript treats them as line ends),
// invalid UTF-8 replaced by U+FFFD.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Most content is plain ASCII: skip eight such bytes at a time,
		// since the byte loop below shows in a search's CPU under load
		// (docs/performance.md, "HTTP: where a request's time goes").
		for i+8 <= len(s) && plainJSON8(binary.LittleEndian.Uint64([]byte(s[i:i+8]))) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// plainJSON8 reports whether the eight bytes packed in x need no escaping
// and no UTF-8 check: none is a control character (below 0x20), a quote, a
// backslash or a byte of 0x80 and above. The tests are the classic "has a
// byte less than n" and "has a zero byte" word tricks: exact as to
// whether any byte qualifies, which is all this asks.
func plainJSON8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	control := (x - 0x20*ones) &^ x
	quote := x ^ '"'*ones
	backslash := x ^ '\\'*ones
	quote = (quote - ones) &^ quote
	backslash = (backslash - ones) &^ backslash
	return (control|quote|backslash|x)&highs == 0
}

// AppendNotification appends n in the API's notification shape.
func AppendNotification(b []byte, n *model.Notification) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendUint(b, n.ID, 10)
	b = append(b, `,"kind":`...)
	b = AppendString(b, n.Kind.String())
	b = append(b, `,"at":"`...)
	b = AppendTime(b, n.At)
	b = append(b, `","read":`...)
	b = strconv.AppendBool(b, n.Read)
	b = append(b, `,"actor":{"id":`...)
	b = strconv.AppendUint(b, n.Actor.ID, 10)
	b = append(b, `,"handle":`...)
	b = AppendString(b, n.Actor.Handle)
	b = append(b, `,"name":`...)
	b = AppendString(b, n.Actor.Name)
	b = append(b, `},"message":`...)
	if n.Message == nil {
		b = append(b, "null"...)
	} else {
		b = AppendMessage(b, n.Message)
	}
	return append(b, '}')
}

// AppendNotifications appends a page of notifications, the number unread
// and the newline encoding/json ends with; next is "" on the last page.
func AppendNotifications(b []byte, items []*model.Notification, next string, unread int) []byte {
	b = append(b, `{"items":[`...)
	for i, n := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendNotification(b, n)
	}
	b = append(b, `],"next":`...)
	if next == "" {
		b = append(b, "null"...)
	} else {
		b = AppendString(b, next)
	}
	b = append(b, `,"unread":`...)
	b = strconv.AppendInt(b, int64(unread), 10)
	return append(b, "}\n"...)
}
