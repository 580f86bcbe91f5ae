package apijson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	"herald/model"
)

// The reference shapes: what the hand-written encoders must match, written
// the plain encoding/json way.

// refTime marshals as TimeLayout through time.Time.AppendFormat.
type refTime time.Time

func (t refTime) MarshalJSON() ([]byte, error) {
	b := append([]byte{'"'}, time.Time(t).UTC().AppendFormat(nil, TimeLayout)...)
	return append(b, '"'), nil
}

// marshal encodes v as the API does: one line, HTML not escaped.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type ownerJSON struct {
	ID     uint64 `json:"id"`
	Email  string `json:"email"`
	Handle string `json:"handle"`
	Name   string `json:"name"`
}

type mentionJSON struct {
	ID     uint64 `json:"id"`
	Handle string `json:"handle"`
}

// messageJSON is the API's message_basic group.
type messageJSON struct {
	ID        uint64        `json:"id"`
	Content   string        `json:"content"`
	User      ownerJSON     `json:"user"`
	CreatedAt refTime       `json:"createdAt"`
	UpdatedAt refTime       `json:"updatedAt"`
	ReplyTo   *uint64       `json:"replyTo"`
	Replies   uint64        `json:"replies"`
	Mentions  []mentionJSON `json:"mentions"`
}

func newMessageJSON(m *model.Message) messageJSON {
	j := messageJSON{
		ID:        m.ID,
		Content:   m.Content,
		User:      ownerJSON{ID: m.OwnerID, Email: m.OwnerEmail, Handle: m.OwnerHandle, Name: m.OwnerName},
		CreatedAt: refTime(m.CreatedAt),
		UpdatedAt: refTime(m.UpdatedAt),
		Replies:   m.Replies,
		Mentions:  []mentionJSON{},
	}
	if m.ReplyTo != 0 {
		j.ReplyTo = &m.ReplyTo
	}
	for _, x := range m.Mentions {
		j.Mentions = append(j.Mentions, mentionJSON{x.UserID, x.Handle})
	}
	return j
}

type pageJSON struct {
	Items []messageJSON `json:"items"`
	Next  *string       `json:"next"`
}

// The hand-written message and page encoders must give exactly what
// encoding/json gives for the API types, for any content and e-mail.
func FuzzAppendMessageJSON(f *testing.F) {
	for _, s := range []string{
		"", "hello", `quote " and backslash \`, "<script>alert(1)</script> & co",
		"tab\tnew\nline\rcarriage\bback\fform", "\x00\x01\x1f\x7f", "Ünïcödé 日本語 😀",
		"line\u2028para\u2029end", "bad \xff\xfe utf-8", "\ufffd", "\u00a0",
	} {
		f.Add(s, "ada@example.com", "Ada \"Countess\" Lovelace", uint64(7), int64(1767366245123456))
		f.Add(s, "ada@example.com", "ada", uint64(8), int64(1767366245123456))
	}
	f.Fuzz(func(t *testing.T, content, email, name string, id uint64, micros int64) {
		at := time.UnixMicro(micros).UTC()
		if at.Year() < 0 || at.Year() > 9999 {
			at = time.UnixMicro(micros % 2e17).UTC() // beyond RFC 3339's years neither encoder applies
		}
		m := &model.Message{ID: id, Content: content, OwnerID: id / 3, OwnerEmail: email, OwnerHandle: "ada", OwnerName: name,
			CreatedAt: at, UpdatedAt: at, Replies: id % 5}
		if id%3 == 1 { // a reply that mentions
			m.ReplyTo = id / 2
			m.Mentions = []model.Mention{{UserID: id / 7, Handle: "bob"}, {UserID: 3, Handle: name}}
		}
		if id%2 == 1 { // edited: the encoder formats updatedAt rather than copying createdAt
			m.UpdatedAt = at.Add(time.Second)
		}
		want, err := marshal(newMessageJSON(m))
		if err != nil {
			t.Skip() // encoding/json refuses it; so would nothing of ours reach it
		}
		if got := append(AppendMessage(nil, m), '\n'); !bytes.Equal(got, want) {
			t.Fatalf("AppendMessage = %s\nencoding/json  = %s", got, want)
		}
		next := content
		for _, msgs := range [][]*model.Message{nil, {m}, {m, m}} {
			items := make([]messageJSON, len(msgs))
			for i := range msgs {
				items[i] = newMessageJSON(msgs[i])
			}
			page := pageJSON{Items: items}
			if next != "" {
				page.Next = &next
			}
			want, err := marshal(page)
			if err != nil {
				t.Fatal(err)
			}
			if got := AppendPage(nil, msgs, next); !bytes.Equal(got, want) {
				t.Fatalf("AppendPage = %s\nencoding/json = %s", got, want)
			}
		}
	})
}

// plainJSON8 must agree with a byte-by-byte check for every byte value at
// every position of the word, next to plain bytes and next to each other
// kind of byte (a borrow from one byte must not hide or invent another).
func TestPlainJSON8(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	for _, fill := range []byte{'a', ' ', 0x7f, 0x1f, '"', 0x80} {
		for pos := range 8 {
			for v := range 256 {
				var w [8]byte
				for i := range w {
					w[i] = fill
				}
				w[pos] = byte(v)
				want := true
				for _, c := range w {
					want = want && plain(c)
				}
				if got := plainJSON8(binary.LittleEndian.Uint64(w[:])); got != want {
					t.Fatalf("plainJSON8(%q) = %v, want %v", w, got, want)
				}
			}
		}
	}
}
