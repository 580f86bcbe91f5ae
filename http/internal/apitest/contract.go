package apitest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// OpenAPIFile returns the path of openapi.json, the document the server
// embeds and serves at /api/docs.json (TestDocsJSON proves the two are the
// same bytes), found from the module's root, so that the tests of any
// package read it.
func OpenAPIFile() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "http", "openapi.json"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod in the working directory or above it")
		}
		dir = parent
	}
}

// apiContract is openapi.json loaded, validated and routed.
type apiContract struct {
	router  routers.Router
	problem *openapi3.SchemaRef // for answers to paths the document lacks
}

// loadedContract loads the document once per test binary: every HTTP
// exchange of every test is checked against it, and parsing it each time
// would cost more than the exchanges themselves.
var loadedContract = sync.OnceValues(func() (*apiContract, error) {
	path, err := OpenAPIFile()
	if err != nil {
		return nil, err
	}
	return loadContract(path)
})

func loadContract(path string) (*apiContract, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("%s is not a valid OpenAPI document: %w", path, err)
	}
	// The document's server is "/", relative to wherever Herald runs; the
	// tests' servers listen on random ports, so match operations by path.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("routing %s: %w", path, err)
	}
	problem := doc.Components.Schemas["Problem"]
	if problem == nil {
		return nil, fmt.Errorf("%s has no Problem schema", path)
	}
	return &apiContract{router: router, problem: problem}, nil
}

// contractOptions are the validator's settings. IncludeResponseStatus makes
// an undocumented status a failure, not a pass.
func contractOptions() *openapi3filter.Options {
	return &openapi3filter.Options{
		IncludeResponseStatus: true,
		// Defaults would be written into the request's query; the request
		// checked must be the one that was sent.
		SkipSettingDefaults: true,
		AuthenticationFunc:  bearerPresent,
	}
}

// bearerPresent satisfies the Bearer scheme when the request carries a
// bearer token at all. Whether the server accepts that token is the server's
// business: a refused one must get a documented 401, which the response
// check covers.
func bearerPresent(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	if in.SecurityScheme == nil || in.SecurityScheme.Type != "http" || !strings.EqualFold(in.SecurityScheme.Scheme, "bearer") {
		return in.NewError(fmt.Errorf("unexpected security scheme %q", in.SecuritySchemeName))
	}
	scheme, token, ok := strings.Cut(in.RequestValidationInput.Request.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return in.NewError(errors.New("no bearer token"))
	}
	return nil
}

// checkContract reports, without stopping the test, an exchange that breaks
// openapi.json. Do calls it for every request, so every HTTP test in the
// package also tests the document. It uses Errorf so that tests sending
// requests from several goroutines may call it.
func (e *Env) checkContract(sent *http.Request, body string, res *Response) {
	e.T.Helper()
	if err := ValidateExchange(sent, body, res); err != nil {
		e.T.Errorf("%s %s -> %d breaks openapi.json: %v\nresponse body: %s",
			sent.Method, sent.URL.RequestURI(), res.Status, err, Truncate(res.Body, 500))
	}
}

// ValidateExchange checks one request and its response against the document.
// The response must always be one the document describes: a documented
// status with its headers and body. Tests send malformed requests on purpose,
// so a request the document forbids is not itself an error, but the server
// must then have refused it with a 4xx: a server that accepts what its
// contract forbids is lying in one place or the other.
func ValidateExchange(sent *http.Request, body string, res *Response) error {
	c, err := loadedContract()
	if err != nil {
		return err
	}
	ctx := context.Background()
	// A fresh request: the body of the one sent has been read, and the
	// validator reads and may rewrite what it is given.
	req := sent.Clone(ctx)
	req.Body, req.GetBody = http.NoBody, nil
	if body != "" {
		req.Body = io.NopCloser(strings.NewReader(body))
		req.ContentLength = int64(len(body))
	}

	route, pathParams, err := c.router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return checkUnrouted(c, res, http.StatusNotFound)
	case errors.Is(err, routers.ErrMethodNotAllowed):
		if err := checkUnrouted(c, res, http.StatusMethodNotAllowed); err != nil {
			return err
		}
		if res.Header.Get("Allow") == "" {
			return errors.New("405 without an Allow header")
		}
		return nil
	case err != nil:
		return fmt.Errorf("finding the operation: %w", err)
	}

	opts := contractOptions()
	reqIn := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: pathParams,
		Route:      route,
		Options:    opts,
	}
	if reqErr := openapi3filter.ValidateRequest(ctx, reqIn); reqErr != nil && (res.Status < 400 || res.Status > 499) {
		return fmt.Errorf("the document forbids this Request, yet the server answered %d instead of a 4xx: %w", res.Status, reqErr)
	}
	resIn := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: reqIn,
		Status:                 res.Status,
		Header:                 res.Header,
		Options:                opts,
	}
	resIn.SetBodyBytes(res.Body)
	if err := openapi3filter.ValidateResponse(ctx, resIn); err != nil {
		return fmt.Errorf("response of operation %s: %w", route.Operation.OperationID, err)
	}
	return nil
}

// checkUnrouted checks the answer to a path or method the document does not
// have: it has no operation to hold a documented response, so it must be
// the router's own refusal, a problem document with the given status.
func checkUnrouted(c *apiContract, res *Response, status int) error {
	if res.Status != status {
		return fmt.Errorf("the document has no such operation, yet the server answered %d instead of %d", res.Status, status)
	}
	if got, want := res.Header.Get("Content-Type"), "application/problem+json"; got != want {
		return fmt.Errorf("Content-Type = %q, want %q", got, want)
	}
	value, err := decodeJSONValue(res.Body)
	if err != nil {
		return err
	}
	if err := c.problem.Value.VisitJSON(value, openapi3.EnableJSONSchema2020(), openapi3.VisitAsResponse()); err != nil {
		return fmt.Errorf("body is not a Problem: %w", err)
	}
	return nil
}

func decodeJSONValue(b []byte) (any, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("body is not JSON: %w", err)
	}
	return v, nil
}

// Truncate is b as text, cut after n bytes, with "..." where it was cut.
func Truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}
