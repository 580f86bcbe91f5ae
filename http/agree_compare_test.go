package http_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"herald/http/internal/apitest"
)

// How TestStoresAgree compares two answers: each server's bindings of the
// run's logical names to what it gave out, and the normalisation that
// leaves of an answer only what must be the same on both stores.

// agreeHeaders are the response headers compared, besides the status and
// the body. Retry-After is compared by presence alone: its value is a
// rounding of each limiter's own state (a difference is logged).
var agreeHeaders = []string{"Content-Type", "ETag", "Location", "Link", "Cache-Control", "WWW-Authenticate",
	"Allow", "X-Content-Type-Options", "Content-Disposition", "Retry-After"}

// agreeServer is one of the two servers, with what its own answers bound
// the run's logical names to: tokens, accounts, messages, invitations,
// codes and cursors each server gave out, which that server's later
// requests use.
type agreeServer struct {
	name string
	e    *apitest.Env

	tokens      map[int]string   // logical token -> the token
	users       map[int]uint64   // logical account -> its ID
	msgs        map[int]uint64   // logical message -> its ID
	etags       map[int][]string // logical message -> its ETags, oldest first
	invites     map[int]uint64   // logical invitation -> its ID
	inviteCodes map[int]string
	resetCodes  map[int]string
	// handles are the public handles of tokens, learnt from listings
	// made with them (the item marked current), both ways.
	handles    map[int]string
	handleOf   map[string]int
	searchNext string
	listNext   string
	auditNext  string

	// names renames values by order of first appearance, per class.
	names  map[string]string
	counts map[string]int
	// known is every renamed string with its name, replaced wherever it
	// shows (headers, links, details).
	known map[string]string
	// echo is what this step's request put in its path, with its name, for
	// the problem details that repeat it.
	echo map[string]string
	// spent is the time its requests took, checks of openapi.json included.
	spent time.Duration
	// userNames names account IDs by logical account, so that one
	// registration refused by one server alone does not shift the names
	// of all the later ones.
	userNames map[string]string
	// issue is what this step's answer gives out, named by logical
	// index: an account, a token, a code.
	issue agreeIssue
}

type agreeIssue struct {
	user, token int    // -1: none
	code        string // the code's name; "": none
}

var agreeNoIssue = agreeIssue{user: -1, token: -1}

func newAgreeServer(name string, e *apitest.Env) *agreeServer {
	return &agreeServer{name: name, e: e,
		tokens: map[int]string{}, users: map[int]uint64{}, msgs: map[int]uint64{}, etags: map[int][]string{},
		invites: map[int]uint64{}, inviteCodes: map[int]string{}, resetCodes: map[int]string{}, handles: map[int]string{}, handleOf: map[string]int{},
		names: map[string]string{}, counts: map[string]int{}, known: map[string]string{},
		userNames: map[string]string{}, issue: agreeNoIssue}
}

// rename returns the placeholder of value in class, giving it the next one
// on first appearance.
func (s *agreeServer) rename(class, value string) string {
	key := class + "\x00" + value
	if n, ok := s.names[key]; ok {
		return n
	}
	s.counts[class]++
	n := fmt.Sprintf("<%s%d>", class, s.counts[class])
	s.names[key] = n
	if class != "unknown-user" && value != "" {
		s.known[value] = n
	}
	return n
}

// userName names an account ID: by its logical account, or by order of
// first appearance for one the run does not know.
func (s *agreeServer) userName(id string) string {
	if n, ok := s.userNames[id]; ok {
		return n
	}
	if s.issue.user >= 0 {
		n := fmt.Sprintf("<u%d>", s.issue.user)
		s.userNames[id] = n
		return n
	}
	return s.rename("unknown-user", id)
}

// Bindings used in requests. A logical thing this server never gave out
// (it diverged earlier) becomes something it cannot know.
const (
	agreeMissingID    = "987654321"
	agreeMalformedTok = "herald_not-a-token"
)

func (s *agreeServer) userID(u int) string {
	id, ok := s.users[u]
	if !ok {
		return agreeMissingID
	}
	v := strconv.FormatUint(id, 10)
	s.echo[v] = s.userName(v)
	return v
}

func (s *agreeServer) msgID(m int) string {
	id, ok := s.msgs[m]
	if !ok {
		return agreeMissingID
	}
	return strconv.FormatUint(id, 10)
}

func (s *agreeServer) inviteID(i int) string {
	id, ok := s.invites[i]
	if !ok {
		return agreeMissingID
	}
	return strconv.FormatUint(id, 10)
}

func (s *agreeServer) etag(m, back int) string {
	tags := s.etags[m]
	if len(tags) == 0 {
		return `"0-0"`
	}
	return tags[max(0, len(tags)-1-back)]
}

// agreeNorm is an answer as compared.
type agreeNorm struct {
	status int
	header []string
	body   string
}

var agreeOrigin = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+`)

// normalise renames what may legitimately differ in res; kind says which
// listing a "next" cursor belongs to.
func (s *agreeServer) normalise(kind string, res *apitest.Response) agreeNorm {
	out := agreeNorm{status: res.Status}
	body := string(res.Body)
	if ct := res.Header.Get("Content-Type"); strings.Contains(ct, "json") && len(res.Body) > 0 {
		dec := json.NewDecoder(bytes.NewReader(res.Body))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err == nil {
			v = s.walk(kind, "", v)
			if kind == "tokens" {
				agreeSortTies(v)
			}
			b, err := json.Marshal(v)
			if err == nil {
				body = string(b)
			}
		} else {
			body = "NOT JSON: " + body
		}
	}
	out.body = body
	for _, h := range agreeHeaders {
		v := strings.Join(res.Header.Values(h), ", ")
		if h == "Retry-After" && v != "" {
			v = "(present)"
		}
		if v != "" {
			out.header = append(out.header, h+": "+s.replaceKnown(v))
		}
	}
	return out
}

// walk renames, in a decoded JSON value, the values that may differ: the
// shape of each object says what its "id" is.
func (s *agreeServer) walk(kind, key string, v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = s.walk(kind, key, x[i])
		}
		return out
	case map[string]any:
		shape := agreeShape(x)
		out := make(map[string]any, len(x))
		// Sorted, so names are given in the same order on both servers
		// ("code" before "url").
		for _, k := range slices.Sorted(maps.Keys(x)) {
			val := x[k]
			str, isStr := val.(string)
			num, isNum := val.(json.Number)
			switch {
			case k == "id" && isNum && (shape == "user" || shape == "target:user"):
				out[k] = s.userName(string(num))
			case k == "id" && isStr && shape == "tokeninfo":
				// Handles are random: named by the logical token they
				// were learnt for, the others alike.
				if lt, ok := s.handleOf[str]; ok {
					out[k] = fmt.Sprintf("<handle of t%d>", lt)
				} else {
					out[k] = "<handle>"
				}
			case k == "token" && isStr && s.issue.token >= 0:
				out[k] = fmt.Sprintf("<t%d>", s.issue.token)
				s.known[str] = out[k].(string)
			case k == "code" && isStr && s.issue.code != "":
				out[k] = s.issue.code
				s.known[str] = s.issue.code
			case k == "token" || k == "code":
				out[k] = s.rename(k, fmt.Sprint(val))
			case k == "next" && isStr && kind == "accounts":
				out[k] = s.rename("cursor", str)
			case (k == "detail" || k == "message" && shape == "violation") && isStr:
				out[k] = s.replaceEcho(s.replaceKnown(str))
			case isStr:
				out[k] = s.replaceKnown(str)
			default:
				out[k] = s.walk(kind, k, val)
			}
		}
		return out
	case string:
		return s.replaceKnown(x)
	}
	return v
}

// agreeSortTies puts the tokens of a listing created at the same instant
// in one order on both servers. Both stores list newest first and break
// ties by the token's hash, which is random: two tokens issued in the same
// microsecond come in an order no client can predict, and that differs
// between any two servers.
func agreeSortTies(v any) {
	page, _ := v.(map[string]any)
	items, _ := page["items"].([]any)
	key := func(it any) string {
		m, _ := it.(map[string]any)
		s, _ := m["createdAt"].(string)
		return s
	}
	whole := func(it any) string {
		b, _ := json.Marshal(it)
		return string(b)
	}
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && key(items[j]) == key(items[i]) {
			j++
		}
		slices.SortStableFunc(items[i:j], func(a, b any) int { return strings.Compare(whole(a), whole(b)) })
		i = j
	}
}

// agreeShape says what an object of the API is, by its fields.
func agreeShape(x map[string]any) string {
	has := func(k string) bool { _, ok := x[k]; return ok }
	switch {
	case has("action") && has("at"):
		return "audit"
	case has("current") && has("lastUsedAt"):
		return "tokeninfo"
	case has("maxUses"):
		return "invite"
	case has("content"):
		return "message"
	case has("propertyPath"):
		return "violation"
	case has("type") && has("id"):
		t, _ := x["type"].(string)
		return "target:" + t
	case has("email"), has("handle"):
		return "user" // an account, a mention, a notification's actor, a profile
	}
	return ""
}

func (s *agreeServer) replaceKnown(v string) string {
	v = agreeOrigin.ReplaceAllString(v, "<origin>")
	// Tokens and codes carry their prefix; cursors show in links.
	if !strings.Contains(v, "herald_") && !strings.Contains(v, "cursor=") {
		return v
	}
	// Longest first, so a code inside a URL is replaced whole.
	for _, k := range slices.SortedFunc(maps.Keys(s.known), func(a, b string) int { return len(b) - len(a) }) {
		if strings.Contains(v, k) {
			v = strings.ReplaceAll(v, k, s.known[k])
		}
	}
	return v
}

// replaceEcho renames in a problem's words the IDs this step's request
// named in its path.
func (s *agreeServer) replaceEcho(v string) string {
	for actual, name := range s.echo {
		re := regexp.MustCompile(`(^|[^0-9])` + regexp.QuoteMeta(actual) + `($|[^0-9])`)
		v = re.ReplaceAllString(v, "${1}"+name+"${2}")
	}
	return v
}
