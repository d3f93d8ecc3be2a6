package handlers

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// kinError is how the gate worded kin-openapi's validation failures when
// it validated requests with openapi3filter.ValidateRequest, before
// checks.go: the reference the checks are held to.
func kinError(err error) error {
	var re *openapi3filter.RequestError
	if !errors.As(err, &re) {
		return invalid("the request does not match the API; see /openapi.yaml")
	}
	var se *openapi3.SchemaError
	hasSchemaErr := errors.As(re.Err, &se)
	switch {
	case re.Parameter != nil:
		p := re.Parameter
		what := p.In + " parameter " + strconv.Quote(p.Name)
		if p.In == openapi3.ParameterInHeader {
			what = p.Name + " header"
		}
		switch {
		case errors.Is(re.Err, openapi3filter.ErrInvalidRequired):
			return invalid("missing " + what)
		case hasSchemaErr:
			return invalid(what + " " + describe(se))
		}
		return invalid(what + " is invalid")
	case re.RequestBody != nil:
		if errors.Is(re.Err, openapi3filter.ErrInvalidRequired) {
			// Worded as the first required field of the body's schema.
			first := re.RequestBody.Content.Get("application/json").Schema.Value.Required[0]
			return invalid("field " + strconv.Quote(first) + " is required")
		}
		if !hasSchemaErr {
			return invalid("the request body must be a JSON object")
		}
		what := "the request body"
		if path := se.JSONPointer(); len(path) > 0 {
			what = "field " + strconv.Quote(strings.Join(path, "."))
		}
		return invalid(what + " " + describe(se))
	}
	return invalid("the request does not match the API; see /openapi.yaml")
}

// describe says what the schema wanted, from the schema itself.
func describe(se *openapi3.SchemaError) string {
	s := se.Schema
	switch se.SchemaField {
	case "type":
		switch {
		case s.Type.Is(openapi3.TypeInteger):
			return "must be an integer"
		case s.Type.Is(openapi3.TypeObject):
			return "must be a JSON object"
		case s.Type != nil:
			return "must be of type " + strings.Join(s.Type.Slice(), " or ")
		}
	case "minimum":
		if s.Min != nil {
			return "must be at least " + strconv.FormatFloat(*s.Min, 'f', -1, 64)
		}
	case "maximum":
		if s.Max != nil {
			return "must be at most " + strconv.FormatFloat(*s.Max, 'f', -1, 64)
		}
	case "format":
		if s.Type.Is(openapi3.TypeInteger) {
			return "is out of range"
		}
		return "must be in " + s.Format + " format"
	case "required":
		return "is required"
	case "minLength":
		if s.MinLength == 1 {
			return "must not be empty"
		}
		return fmt.Sprintf("must be at least %d characters long", s.MinLength)
	case "maxLength":
		if s.MaxLength != nil {
			return fmt.Sprintf("must be at most %d characters long", *s.MaxLength)
		}
	case "pattern":
		return patternRules[s.Pattern] // the gate's words for it
	case "enum":
		allowed := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			allowed[i] = fmt.Sprint(e)
		}
		return "must be one of " + strings.Join(allowed, ", ")
	case "properties":
		allowed := slices.Sorted(maps.Keys(s.Properties))
		if obj, ok := se.Value.(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(obj)) {
				if _, known := s.Properties[k]; !known {
					return fmt.Sprintf("has unknown field %s; known fields: %s", quoteShort(k), strings.Join(allowed, ", "))
				}
			}
		}
		return "has unknown fields; known fields: " + strings.Join(allowed, ", ")
	}
	return "is invalid"
}

// FuzzChecksMatchKinOpenAPI holds the gate's checks to what kin-openapi's
// ValidateRequest said about the same request, in the same words: same
// verdict, same first problem, for every operation of the spec.
func FuzzChecksMatchKinOpenAPI(f *testing.F) {
	bodies := []string{"", `{}`, `{"ttl_ms":1000}`, `{"ttl_ms":1000,"ttl":5}`, `{"ttl_ms":1.5}`, `{"ttl_ms":"1000"}`,
		`{"ttl_ms":0}`, `{"ttl_ms":-5}`, `{"ttl_ms":99999999999999999999}`, `{"wait_ms":-1}`, `{"ttl_ms":2e3}`,
		`{"ttl_ms":null}`, `{"owner":"` + strings.Repeat("x", 129) + `"}`, `{"owner":"` + strings.Repeat("é", 128) + `"}`,
		`{"owner":7}`, `ttl_ms=5000`, `[1]`, `{"ttl_ms":`, `null`, `true`, `"x"`, `5`, `{"a":1,"owner":5}`,
		`{"wait_ms":5}`, `{"ttl_ms":1e400}`, `{"ttl_ms":-0}`, `{"ttl_ms":9223372036854775808}`, `{"ttl_ms":{}}`,
		`{"ttl_ms":[]}`, `{"ttl_ms":true}`, `{"owner":null}`, `{"owner":""}`, `{"b":1,"a":2}`, `{"wait_ms":1.0}`,
		`{"ttl_ms":1E2}`, `{"ttl_ms":0.5e1}`, `{"limit":3}`, `{"limit":0}`, `{"limit":10000}`, `{"limit":10001}`,
		`{"limit":1e4}`, `{"limit":10000.5}`, `{"limit":null}`, `{"limit":"3"}`, `{"limit":3,"ttl_ms":0}`, `{"ttl_ms":1000}`,
		`{"limit":3,"zz":1}`, `{"limit":-1,"wait_ms":-1}`, `{"limit":99999999999999999999}`,
		`{"mode":"shared"}`, `{"mode":"exclusive","ttl_ms":5}`, `{"mode":"read"}`, `{"mode":""}`, `{"mode":5}`,
		`{"mode":null}`, `{"mode":"Shared"}`, `{"mode":"shared","limit":2}`}
	for _, b := range bodies {
		f.Add("billing", "invoice-42", "tok", true, []byte(b))
	}
	for _, p := range [][2]string{{"Billing", "b"}, {"a", ".b"}, {strings.Repeat("a", 64), "b"}, {"a", "b c"}, {"", ""}, {"a", "é"}} {
		f.Add(p[0], p[1], "tok", true, []byte(`{"ttl_ms":0}`))
	}
	f.Add("a", "b", "", true, []byte(nil))
	f.Add("a", "b", "", false, []byte(nil))
	f.Add("a", "b", strings.Repeat("t", 257), true, []byte(nil))
	f.Add("a", "b", strings.Repeat("é", 256), true, []byte(nil))

	spec, err := GetSpec()
	if err != nil {
		f.Fatal(err)
	}
	g, err := newGate(spec, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	noAuth := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, SkipSettingDefaults: true}
	f.Fuzz(func(t *testing.T, ns, name, lockToken string, hasToken bool, body []byte) {
		for path, item := range spec.Paths.Map() {
			for method, op := range item.Operations() {
				params := map[string]string{"namespace": ns, "name": name}
				newReq := func() (*http.Request, []byte, bool) {
					r := httptest.NewRequest(method, "/x", bytes.NewReader(body))
					if hasToken {
						r.Header["Lock-Token"] = []string{lockToken}
					}
					data, _, err := readBody(httptest.NewRecorder(), r)
					return r, data, err == nil
				}
				r, data, ok := newReq()
				if !ok {
					return // readBody refused it, before either check
				}
				got := g.ops[method+" "+path].checks.check(r, data, func(k string) string { return params[k] })
				r, _, _ = newReq()
				route := &routers.Route{Spec: spec, Path: path, PathItem: item, Method: method, Operation: op}
				var want error
				if err := openapi3filter.ValidateRequest(t.Context(), &openapi3filter.RequestValidationInput{
					Request: r, PathParams: params, Route: route, Options: noAuth}); err != nil {
					want = kinError(err)
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%s %s ns=%q name=%q Lock-Token=%q (%v) body %q:\ngot  %v\nwant %v", method, path, ns, name, lockToken, hasToken, body, got, want)
				}
			}
		}
	})
}

// TestQueryBooleanMatchesKinOpenAPI: a boolean query parameter (a ticket
// poll's signed) gets the same verdict, in the same words, from the gate
// as from kin-openapi, for what strconv.ParseBool reads and what it
// does not; FuzzChecksMatchKinOpenAPI sends no query.
func TestQueryBooleanMatchesKinOpenAPI(t *testing.T) {
	spec, err := GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGate(spec, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const path = "/locks/{namespace}/{name}/tickets/{ticket}"
	item := spec.Paths.Find(path)
	route := &routers.Route{Spec: spec, Path: path, PathItem: item, Method: http.MethodGet, Operation: item.Get}
	params := map[string]string{"namespace": "a", "name": "b", "ticket": "AAAAAAAAAAAAAAAAAAAAAA"}
	noAuth := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, SkipSettingDefaults: true}
	for q, ok := range map[string]bool{"": true, "?signed=true": true, "?signed=false": true, "?signed=1": true,
		"?signed=0": true, "?signed=TRUE": true, "?signed=true&signed=x": true, "?signed=": false, "?signed=yes": false,
		"?signed=truee": false, "?signed=%20true": false} {
		newReq := func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/x"+q, nil)
			r.Header.Set("Ticket-Token", "tok")
			return r
		}
		got := g.ops["GET "+path].checks.check(newReq(), nil, func(k string) string { return params[k] })
		var want error
		if err := openapi3filter.ValidateRequest(t.Context(), &openapi3filter.RequestValidationInput{
			Request: newReq(), PathParams: params, Route: route, Options: noAuth}); err != nil {
			want = kinError(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("query %q: got %v, want %v", q, got, want)
		}
		if (got == nil) != ok {
			t.Errorf("query %q: got %v, want it refused: %v", q, got, !ok)
		}
	}
}
