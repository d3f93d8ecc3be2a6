package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"

	"github.com/lockgate/lockgate/auth"
	"github.com/lockgate/lockgate/internal/jsonkeys"
	"github.com/lockgate/lockgate/middleware"
	"github.com/lockgate/lockgate/ratelimit"
)

// MaxBodyBytes is the largest request body accepted; more is a 413.
const MaxBodyBytes = 16 << 10

// gate runs after routing, in front of every operation of the spec, and
// applies what the spec says about it, in this order:
//
//  1. security: operations with a security requirement need a valid bearer
//     token (401), whose claims go into the context;
//  2. the subject's rate (429), before any work on the request;
//  3. the body: at most MaxBodyBytes (413), read as JSON whatever its
//     Content-Type says, whitespace alone counting as no body;
//  4. validation of parameters and body against the spec (400);
//  5. the namespace grant: a token must grant the {namespace} it touches
//     (403). It runs last so that an invalid namespace is a 400, not a 403.
//
// It finds the operation by chi's matched route pattern, so it must be
// mounted with Group/With (after routing), not with the top-level Use.
type gate struct {
	ops      map[string]*gateOp // by method + " " + route pattern
	authn    *auth.Authenticator
	subjects *ratelimit.SubjectLimiter // or nil
}

// gateOp is what the gate knows of one operation.
type gateOp struct {
	secured bool
	checks  *opChecks
}

func newGate(spec *openapi3.T, authn *auth.Authenticator, subjects *ratelimit.SubjectLimiter) (*gate, error) {
	g := &gate{ops: make(map[string]*gateOp), authn: authn, subjects: subjects}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			checks, err := newChecks(item, op)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", method, path, err)
			}
			g.ops[method+" "+path] = &gateOp{secured: secured(spec, op), checks: checks}
		}
	}
	return g, nil
}

func (g *gate) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := chi.RouteContext(r.Context())
		pattern := r.Pattern // chi's rc.RoutePattern(), which it set, without building it again
		if pattern == "" {
			pattern = rc.RoutePattern()
		}
		op := g.ops[r.Method+" "+pattern]
		if op == nil {
			writeError(w, r, fmt.Errorf("no operation in the spec for %s %s", r.Method, pattern))
			return
		}
		claims, authenticated := auth.Claims{}, false
		if op.secured {
			var err error
			if r, claims, err = g.admit(r); err != nil {
				writeError(w, r, err)
				return
			}
			authenticated = true
		}
		body, cb, err := readBody(w, r)
		if err != nil {
			writeError(w, r, err)
			return
		}
		param := pathParams(r, rc)
		value, err := op.checks.checkValue(r, body, param)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if value != nil {
			cb.value = value
			r.Body = cb
		}
		if ns := param("namespace"); ns != "" && authenticated {
			if err := grants(claims, ns); err != nil {
				writeError(w, r, err)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// admit verifies r's bearer token (401) and charges its subject's rate
// (429), and returns r with the token's claims in its context: the first
// steps of the gate, and of every call to /mcp.
func (g *gate) admit(r *http.Request) (*http.Request, auth.Claims, error) {
	claims, err := g.authn.Authenticate(r)
	if err != nil {
		return r, claims, err
	}
	if err := g.subjects.Allow(claims); err != nil {
		return r, claims, err
	}
	return middleware.SetClaims(r, claims), claims, nil
}

// grants is the one check that a token may touch a namespace: a 403
// forbidden that names the namespace, and those the token grants, if not.
func grants(claims auth.Claims, namespace string) error {
	if !claims.Allows(namespace) {
		return &forbiddenError{namespace: namespace, claims: claims}
	}
	return nil
}

// pathParams returns the path parameters of r as the operation receives
// them: percent-decoded. When the URL has escapes, chi routes on the raw
// path (so that %2F stays inside its segment) and keeps the parameters
// encoded, while the generated wrapper decodes them before the operation
// sees them. So the gate checks, and grants, the decoded value, the one
// the operation acts on: /locks/demo/a%3Ab is lock demo/a:b, which
// openapi-fetch sends that way, and a%2Fb decodes to a name with a '/',
// which the pattern refuses.
func pathParams(r *http.Request, rc *chi.Context) func(string) string {
	if r.URL.RawPath == "" {
		return rc.URLParam // nothing was escaped: chi's values are decoded
	}
	return func(name string) string {
		v := rc.URLParam(name)
		if d, err := url.PathUnescape(v); err == nil {
			return d
		}
		// net/http parsed the path, so its escapes are valid; if one is
		// not, the '%' left in v fails the parameter's pattern.
		return v
	}
}

// secured reports whether the spec asks for a token for op.
func secured(spec *openapi3.T, op *openapi3.Operation) bool {
	reqs := spec.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	for _, req := range reqs {
		if len(req) == 0 {
			return false // an empty requirement means "anonymous is fine"
		}
	}
	return len(reqs) > 0
}

// readBody reads the whole body, up to MaxBodyBytes, and puts it back as
// JSON: callers use curl -d, which labels JSON as a form, and there is no
// other body type in the API to confuse it with. A key that appears twice
// in one object, or data after the object, is refused (400): parsers
// disagree on which one counts.
//
// It returns the body, or nil when there is none, and r's new Body, which
// the gate gives the checked value.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, *checkedBody, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil, nil
	}
	body := r.Body
	if r.ContentLength < 0 || r.ContentLength > MaxBodyBytes {
		// A body of announced length no longer than the limit needs no
		// MaxBytesReader: net/http reads no more than announced.
		body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
	}
	data, err := readAll(body, r.ContentLength)
	r.Body.Close()
	if err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			return nil, nil, errTooLarge
		}
		return nil, nil, invalid("the request body could not be read")
	}
	if len(bytes.TrimSpace(data)) == 0 {
		r.Body, r.ContentLength = http.NoBody, 0
		r.Header.Del("Content-Type")
		return nil, nil, nil
	}
	key, dup, flat := scanFlat(data) // the usual body, in one pass
	if !flat {
		key, dup = jsonkeys.Duplicate(data)
	}
	if dup {
		return nil, nil, invalid("field " + quoteShort(key) + " appears more than once")
	}
	if !flat && jsonkeys.Trailing(data) {
		return nil, nil, invalid("the request body must be one JSON object, with nothing after it")
	}
	if !flat {
		if err := syntaxError(data); err != nil {
			return nil, nil, err
		}
	}
	cb := &checkedBody{}
	cb.Reset(data)
	r.Body, r.ContentLength = &cb.requestBody, int64(len(data))
	r.Header["Content-Type"] = jsonContentType
	return data, cb, nil
}

// syntaxError says where data stops being JSON, or returns nil. The words
// are our own (the place, and the character when it is printable), never
// encoding/json's message.
func syntaxError(data []byte) error {
	const shape = `; send one JSON object, such as {"ttl_ms":60000}`
	var raw json.RawMessage
	err := json.NewDecoder(bytes.NewReader(data)).Decode(&raw)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		line, col := lineColumn(data, len(data))
		return invalid(fmt.Sprintf("the request body is not valid JSON: it ends at line %d, column %d, before the JSON is complete%s", line, col+1, shape))
	}
	var se *json.SyntaxError
	if !errors.As(err, &se) || se.Offset < 1 || se.Offset > int64(len(data)) {
		return nil
	}
	at := int(se.Offset) - 1 // the byte it could not take
	c := data[at]
	what := fmt.Sprintf("byte 0x%02x", c)
	if c >= ' ' && c <= '~' {
		what = strconv.QuoteRune(rune(c))
	}
	line, col := lineColumn(data, at)
	return invalid(fmt.Sprintf("the request body is not valid JSON: unexpected %s at line %d, column %d%s", what, line, col+1, shape))
}

// lineColumn is the line (from 1) and column (from 0, in bytes) of data[at].
func lineColumn(data []byte, at int) (line, col int) {
	before := data[:at]
	return 1 + bytes.Count(before, []byte("\n")), at - (bytes.LastIndexByte(before, '\n') + 1)
}

// requestBody is a request body the gate has read, to be read again.
type requestBody struct{ bytes.Reader }

func (*requestBody) Close() error { return nil }

// checkedBody is a request body the gate has read and checked. It hands
// the generated code the value the check decoded (the ValidatedValue of
// oapi-codegen's runtime.BindJSONBody), so that the body is not decoded a
// second time: that decode's buffers were 15 % of the gateway's allocated
// bytes. What the value cannot give (a number such as 2e3 for
// an int64 field), BindJSONBody decodes from the bytes, as before. Until
// the gate has a value, the request's body is its requestBody, which has
// none to give.
type checkedBody struct {
	requestBody
	value map[string]any
}

// ValidatedValue returns the checked body, decoded.
func (b *checkedBody) ValidatedValue() any { return b.value }

// Header values the gateway sets on every request or answer of a kind,
// shared (read-only) so that setting them allocates nothing: net/http
// copies a response's header when it writes it, and nothing here changes
// a value in place.
var (
	jsonContentType = []string{"application/json"}
	noStore         = []string{"no-store"}
)

// readAll is io.ReadAll for a body that announced its size: one buffer of
// that size, where io.ReadAll starts at 512 bytes (it was 5 % of the
// gateway's allocated bytes, for bodies of 50). A body longer than it
// said grows the buffer as io.ReadAll would; MaxBytesReader bounds it.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 || size > MaxBodyBytes {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1) // +1: room to read the EOF without growing
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}
