package http

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"herald/model"
)

// fieldSpec says which body fields an operation takes. Fields the client may
// see but not set are listed as read-only, so the refusal can say so.
type fieldSpec struct {
	writable   []string
	readOnly   []string
	mergePatch bool // also accept application/merge-patch+json
	// booleans and integers are writable fields whose JSON values are
	// true or false, or whole numbers, rather than strings; forms send
	// them as text, which fields.boolean and fields.integer read.
	booleans, integers []string
	// jsonOnly: the body is a JSON object of nested values (a browser's
	// PushSubscription), which no form can carry; its handler reads it.
	jsonOnly bool
}

// fields are the decoded body: name → value. A nil value is an explicit JSON
// null, which a merge patch uses to mean "remove".
type fields map[string]*string

// str returns the field's value, "" when absent or null.
func (f fields) str(name string) string {
	if v := f[name]; v != nil {
		return *v
	}
	return ""
}

// boolean returns the field's value, nil when absent. Errors: 422 naming
// the field when it is null or not true or false.
func (f fields) boolean(name string) (*bool, error) {
	v, present := f[name]
	if !present {
		return nil, nil
	}
	if v != nil {
		switch *v {
		case "true":
			return ptrTo(true), nil
		case "false":
			return ptrTo(false), nil
		}
	}
	var invalid model.ValidationError
	invalid.Add(name, "must be true or false")
	return nil, invalid.Err()
}

// integer returns the field's value, nil when absent or null. Errors: 422
// naming the field when it is not a whole number.
func (f fields) integer(name string) (*int64, error) {
	v := f[name]
	if v == nil {
		return nil, nil
	}
	n, err := strconv.ParseInt(*v, 10, 64)
	if err != nil {
		var invalid model.ValidationError
		invalid.Add(name, "must be a whole number")
		return nil, invalid.Err()
	}
	return &n, nil
}

func ptrTo[T any](v T) *T { return &v }

// Media types accepted for request bodies.
const (
	mediaJSON       = "application/json"
	mediaMergePatch = "application/merge-patch+json"
	mediaForm       = "application/x-www-form-urlencoded"
	mediaMultipart  = "multipart/form-data"
)

// decodeBody reads the request body in any accepted media type into fields,
// refusing unknown and read-only fields before anything is stored. The body
// is capped at maxBytes.
func decodeBody(w http.ResponseWriter, r *http.Request, maxBytes int64, spec fieldSpec) (fields, error) {
	media, params, err := boundedBody(w, r, maxBytes, spec)
	if err != nil {
		return nil, err
	}
	var f fields
	switch {
	case media == mediaJSON, media == mediaMergePatch && spec.mergePatch:
		f, err = decodeJSON(r.Body, spec)
	case media == mediaForm:
		f, err = decodeForm(r.Body, spec)
	case media == mediaMultipart:
		f, err = decodeMultipart(r.Body, params["boundary"], spec)
	default:
		return nil, unsupportedMediaType("Content-Type %s is not supported here; %s", media, whatToSend(spec))
	}
	if isTooLarge(err) {
		return nil, bodyTooLarge(maxBytes)
	}
	return f, err
}

// isTooLarge reports whether err came from the body cap; decoders pass it up
// untouched so decodeBody can answer 413 rather than 400.
func isTooLarge(err error) bool {
	var tooLarge *http.MaxBytesError
	return errors.As(err, &tooLarge)
}

// whatToSend tells a client whose Content-Type was refused what to send
// instead: the header a JSON body needs first, since a JSON body sent
// without it (curl -d's default) is the usual mistake.
func whatToSend(spec fieldSpec) string {
	if spec.jsonOnly {
		return "send the header Content-Type: " + mediaJSON + " with a JSON object"
	}
	return "send the header Content-Type: " + mediaJSON + " with a JSON object, or fields as " +
		strings.Join(acceptedMedia(spec)[1:], ", ")
}

// jsonSentAsForm: a form body whose first character opens a JSON object,
// which no form field of ours starts with. curl -d sends bodies as a form
// unless told otherwise.
func jsonSentAsForm() error {
	return unsupportedMediaType("request body is JSON but its Content-Type says %s (curl -d's default); send the header Content-Type: %s", mediaForm, mediaJSON)
}

// refuseBody refuses a request that carries a body to a route that takes
// none, rather than ignore what the client meant to say. A body of unknown
// length (chunked) counts once a byte of it arrives. GET and HEAD bodies
// have no meaning (RFC 9110) and are left unread.
func refuseBody(r *http.Request, rt route) error {
	if r.Method == http.MethodGet || r.Method == http.MethodHead || takesBody(rt) {
		return nil
	}
	switch {
	case r.ContentLength == 0:
		return nil
	case r.ContentLength < 0:
		var one [1]byte
		if n, _ := io.ReadFull(r.Body, one[:]); n == 0 {
			return nil
		}
	}
	return badRequest("", "%s %s takes no request body; send the request without one", r.Method, r.URL.Path)
}

// bodyRoutes are the routes that take a request body (method and path),
// with the fields each takes; every other route refuses one (refuseBody).
var bodyRoutes = map[[2]string]fieldSpec{
	{http.MethodPost, "/api/register"}:               registerFields,
	{http.MethodPost, "/api/login"}:                  loginFields,
	{http.MethodPost, "/api/password-reset"}:         passwordResetFields,
	{http.MethodDelete, "/api/me"}:                   accountDeleteFields,
	{http.MethodPatch, "/api/me"}:                    profileFields,
	{http.MethodPost, "/api/me/password"}:            passwordChangeFields,
	{http.MethodPost, "/api/me/notifications/read"}:  notificationsReadFields,
	{http.MethodPost, "/api/message"}:                messageFields,
	{http.MethodPost, "/api/messages"}:               messageFields,
	{http.MethodPatch, "/api/messages/:id"}:          messagePatchFields,
	{http.MethodPatch, "/api/admin/users/:id"}:       accountPatchFields,
	{http.MethodPost, "/api/admin/invites"}:          inviteFields,
	{http.MethodPatch, "/api/admin/settings"}:        settingsFields,
	{http.MethodPost, "/api/me/push-subscriptions"}:  pushSubscriptionFields,
	{http.MethodPost, "/api/password-reset/request"}: resetRequestFields,
}

func takesBody(rt route) bool {
	_, ok := bodyRoutes[[2]string{rt.method, rt.path}]
	return ok
}

func acceptedMedia(spec fieldSpec) []string {
	if spec.jsonOnly {
		return []string{mediaJSON}
	}
	media := []string{mediaJSON, mediaForm, mediaMultipart}
	if spec.mergePatch {
		media = append(media, mediaMergePatch)
	}
	return media
}

// checkFieldNames refuses the first field, in name order so the answer is
// stable, that the operation does not take. Each decoder calls it once it
// knows the names, before it judges any value.
func checkFieldNames(names []string, spec fieldSpec) error {
	slices.Sort(names)
	for _, name := range names {
		switch {
		case slices.Contains(spec.writable, name):
		case slices.Contains(spec.readOnly, name):
			return badRequest(name, "field %q is read-only and cannot be set", name)
		default:
			return badRequest(name, "unknown field %q; this operation takes %s", name, strings.Join(spec.writable, ", "))
		}
	}
	return nil
}

// decodeJSON accepts exactly one JSON object whose values are strings or
// null (or, for the fields spec says, booleans or whole numbers). It walks the object token by token so a repeated key is refused, as
// a repeated form field is, instead of the last one silently winning. Field
// names are checked before value types, so {"id": 3} is refused as
// read-only rather than as "not a string".
func decodeJSON(body io.Reader, spec fieldSpec) (fields, error) {
	b, err := io.ReadAll(body) // capped by decodeBody
	if err != nil {
		return nil, err
	}
	// One pass over a sound body; a body the walk refuses is parsed again
	// by checkJSONSyntax only to say where it goes wrong.
	dec := json.NewDecoder(bytes.NewReader(b))
	malformed := func(error) error {
		if err := checkJSONSyntax(b); err != nil {
			return err
		}
		return badRequest("", "request body is not a valid JSON object")
	}
	if tok, err := dec.Token(); err != nil {
		return nil, malformed(err)
	} else if tok != json.Delim('{') {
		if err := checkJSONSyntax(b); err != nil {
			return nil, err
		}
		return nil, badRequest("", "request body must be a JSON object")
	}
	raw := make(map[string]json.RawMessage)
	var names []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed(err)
		}
		name := tok.(string) // inside an object, the decoder only yields string keys here
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, malformed(err)
		}
		if _, dup := raw[name]; dup {
			return nil, repeatedField(name)
		}
		raw[name] = value
		names = append(names, name)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, malformed(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err := checkJSONSyntax(b); err != nil {
			return nil, err
		}
		return nil, badRequest("", "request body has data after the JSON object")
	}
	if err := checkFieldNames(names, spec); err != nil {
		return nil, err
	}
	f := make(fields, len(raw))
	var invalid model.ValidationError
	// In name order (checkFieldNames sorted names), not the map's: of two
	// bad values, the same one is named every time.
	for _, name := range names {
		value := raw[name]
		if bytes.Equal(value, []byte("null")) {
			f[name] = nil
			continue
		}
		switch {
		case slices.Contains(spec.booleans, name):
			if v := string(value); v != "true" && v != "false" {
				return nil, badRequest(name, "field %q must be true or false", name)
			}
			f[name] = ptrTo(string(value))
			continue
		case slices.Contains(spec.integers, name):
			var n json.Number
			if c := value[0]; c != '-' && (c < '0' || c > '9') || json.Unmarshal(value, &n) != nil {
				return nil, badRequest(name, "field %q must be a number", name)
			}
			if _, err := n.Int64(); err != nil {
				return nil, badRequest(name, "field %q must be a whole number", name)
			}
			f[name] = ptrTo(n.String())
			continue
		}
		// encoding/json quietly turns invalid UTF-8 and lone surrogate
		// escapes into U+FFFD; we would store a string the client never
		// sent. Raw bytes that are not UTF-8 make the JSON text malformed.
		if !utf8.Valid(value) {
			return nil, badRequest(name, "field %q is not valid UTF-8", name)
		}
		var s string
		if err := json.Unmarshal(value, &s); err != nil {
			return nil, badRequest(name, "field %q must be a string", name)
		}
		if strings.ContainsRune(s, utf8.RuneError) && !sentReplacementChar(value) {
			invalid.Add(name, "must be valid UTF-8 (it has an unpaired surrogate escape)")
		}
		f[name] = &s
	}
	return f, invalid.Err()
}

// checkJSONSyntax refuses a body that is not one JSON text, saying where
// it goes wrong: the 1-based line and column (in characters) of the first
// byte the parser could not take, so a person can find it in what they
// typed.
func checkJSONSyntax(b []byte) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return badRequest("", "request body is empty; send a JSON object")
	}
	var syntax *json.SyntaxError
	if err := json.Unmarshal(b, new(json.RawMessage)); !errors.As(err, &syntax) {
		return nil // valid; or a failure that is no syntax error, which the walk after will meet
	}
	// encoding/json says so when the text ends before the value does;
	// Offset then counts every byte.
	if syntax.Offset >= int64(len(b)) && strings.HasPrefix(syntax.Error(), "unexpected end") {
		line, col := textPosition(b, len(b))
		return badRequest("", "request body is cut short: the JSON stops at line %d, column %d before it is complete", line, col)
	}
	// Offset counts the byte at fault, which is at Offset-1.
	line, col := textPosition(b, int(max(syntax.Offset-1, 0)))
	return badRequest("", "request body is not valid JSON at line %d, column %d: %s", line, col, syntax.Error())
}

// textPosition is the 1-based line and column, in characters, of the byte
// at offset in b.
func textPosition(b []byte, offset int) (line, column int) {
	before := b[:offset]
	line = 1 + bytes.Count(before, []byte("\n"))
	column = 1 + utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	return line, column
}

// sentReplacementChar reports whether a raw JSON string itself carries
// U+FFFD, literally or escaped, so a decoded U+FFFD was the client's own.
func sentReplacementChar(raw []byte) bool {
	return bytes.Contains(raw, []byte("\uFFFD")) || bytes.Contains(bytes.ToLower(raw), []byte(`\ufffd`))
}

// decodeForm reads an application/x-www-form-urlencoded body.
func decodeForm(body io.Reader, spec fieldSpec) (fields, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	if trimmed := bytes.TrimLeft(b, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		return nil, jsonSentAsForm()
	}
	values, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, badRequest("", "request body is not valid form encoding")
	}
	f := make(fields, len(values))
	for name, vs := range values {
		if len(vs) > 1 {
			return nil, repeatedField(name)
		}
		f[name] = &vs[0]
	}
	return f, checkFieldNames(slices.Collect(maps.Keys(f)), spec)
}

// decodeMultipart reads a multipart/form-data body. A file part counts as a
// field whose value is the file's text. The body is already capped by
// decodeBody, so it is read whole: that lets us insist on the closing
// delimiter, which Go's multipart reader does not check (a body cut short
// after a part looks to it like a finished form).
func decodeMultipart(body io.Reader, boundary string, spec fieldSpec) (fields, error) {
	if boundary == "" {
		return nil, badRequest("", "multipart body has no boundary parameter")
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	closing := []byte("--" + boundary + "--")
	if !bytes.HasPrefix(b, closing) && !bytes.Contains(b, append([]byte("\n"), closing...)) {
		return nil, badRequest("", "multipart body is incomplete: its closing boundary is missing")
	}
	mr := multipart.NewReader(bytes.NewReader(b), boundary)
	f := make(fields)
	for {
		part, err := mr.NextPart()
		if err == io.EOF { // exactly EOF: a wrapped EOF means the body was cut short
			return f, checkFieldNames(slices.Collect(maps.Keys(f)), spec)
		}
		if err != nil {
			return nil, badMultipart()
		}
		name := part.FormName()
		if name == "" {
			return nil, badRequest("", "multipart part has no field name")
		}
		if _, dup := f[name]; dup {
			return nil, repeatedField(name)
		}
		value, err := io.ReadAll(part)
		if err != nil {
			return nil, badMultipart()
		}
		s := string(value)
		f[name] = &s
	}
}

// boundedBody caps r's body at maxBytes (413 beyond) and returns its
// media type and parameters (415 when it has none, or none that parses).
func boundedBody(w http.ResponseWriter, r *http.Request, maxBytes int64, spec fieldSpec) (string, map[string]string, error) {
	if r.ContentLength > maxBytes {
		return "", nil, bodyTooLarge(maxBytes)
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBytes)
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return "", nil, unsupportedMediaType("Content-Type is missing; %s", whatToSend(spec))
	}
	media, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", nil, unsupportedMediaType("Content-Type %q cannot be parsed; %s", ct, whatToSend(spec))
	}
	return media, params, nil
}
