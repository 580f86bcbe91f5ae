package push

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"herald/model"
)

// MaxPayloadBytes bounds a push's JSON before encryption; encrypted into
// one record of 4,096 bytes (webpush-go's), it leaves room to spare for
// the record's header, padding delimiter and tag.
const MaxPayloadBytes = 3000

// bodyRunes is where a message's text is cut for a notification's body:
// a phone shows a couple of lines.
const bodyRunes = 240

// payload is what a push carries: what the notifications page shows of a
// notification, and where the web client shows its message.
type payload struct {
	Kind      string `json:"kind"`
	ID        uint64 `json:"id"`
	Title     string `json:"title"`
	Body      string `json:"body"`
	URL       string `json:"url"`
	MessageID uint64 `json:"messageId"`
}

// Payload is the JSON pushed for notification n, at most MaxPayloadBytes;
// publicURL is the server's public address ("" for a link relative to
// the service worker's origin).
func Payload(n *model.Notification, publicURL string) []byte {
	p := payload{Kind: n.Kind.String(), ID: n.ID, MessageID: n.MessageID,
		URL: publicURL + "/#/messages/" + strconv.FormatUint(n.MessageID, 10)}
	who := n.Actor.Name
	if who == "" {
		who = "@" + n.Actor.Handle
	}
	switch n.Kind {
	case model.NotifyMention:
		p.Title = who + " mentioned you"
	case model.NotifyReply:
		p.Title = who + " replied to you"
	default:
		p.Title = who
	}
	if n.Message != nil {
		p.Body = cut(n.Message.Content, bodyRunes)
	}
	return p.fit()
}

// fit is p as JSON of at most MaxPayloadBytes.
func (p payload) fit() []byte {
	for {
		b, err := json.Marshal(&p)
		if err == nil && len(b) <= MaxPayloadBytes {
			return b
		}
		// Escaping can make a short text long; halve until it fits.
		switch {
		case p.Body != "":
			p.Body = cut(p.Body, utf8.RuneCountInString(p.Body)/2)
		case len(p.Title) > 0:
			p.Title = cut(p.Title, utf8.RuneCountInString(p.Title)/2)
		default:
			p.URL = ""
		}
	}
}

// cut returns s up to n runes, with an ellipsis when it cut anything.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for range n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i] + "…"
}

// Topic is the Topic header of notification id's pushes: 32 base64url
// characters, the same on every retry (a push service replaces a pending
// push of the same topic rather than deliver both) and different for
// every notification, from a hash so it says nothing of the server's
// counts; serverKey sets servers apart.
func Topic(serverKey []byte, id uint64) string {
	h := sha256.New()
	h.Write([]byte("herald push topic\x00"))
	h.Write(serverKey)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], id)
	h.Write(b[:])
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:24])
}
