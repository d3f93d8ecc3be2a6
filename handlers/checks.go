package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/lockgate/lockgate/locks"
)

// Fast path. The gate checks parameters and bodies with checks built once
// from the spec, and hands the generated code the body it decoded.
//
// Plain version: openapi3filter.ValidateRequest on the operation's route
// (no authentication, no defaults), its errors worded by kinError
// (kin_test.go), then the generated code decoding the body itself
// (BindJSONBody with no ValidatedValue). The checks must give the same
// verdict and the same first problem in the same words, in the
// validator's order: the path item's parameters, the operation's, then
// the body, its keys sorted. They cover the schema keywords openapi.yaml
// uses; newChecks refuses a spec that uses others, so the spec cannot
// outgrow them unnoticed.
//
// Held to it by FuzzChecksMatchKinOpenAPI, for every operation of the
// spec. checkFlat, a flat body checked where it stands, is jsonflat.go's
// fast path, held to checkDecoded by FuzzCheckFlat.
//
// Gain, measured 2026-12-02 at 7a299a4 against the same gateway with the
// plain version swapped in: gateway CPU per lock cycle (acquire and
// release; utime + stime of the gateway process) 179.7 µs plain against
// 142.0 µs (medians), the pairs' ratio 1.21 (95 % bootstrap interval
// 1.12-1.29), 20 alternating pairs of 2 to 3 s runs of the benchmark lab's
// --processes --targets embedded (docs/PERFORMANCE.md; 16 uncontended
// clients, load average 10 to 22 on 2 cores). Merged CPU profiles of six
// runs of 4 s of each: ValidateRequest and kinError 10.4 % of the plain
// gateway's samples, checkValue 2.3 % of this one's.
// BenchmarkAcquireRelease: 142 allocations and 13.5 kB per cycle against
// 67 and 6.9 kB; process CPU per cycle 38.5 µs against 20.9 µs.

// opChecks is what the spec says about one operation's input.
type opChecks struct {
	params       []paramCheck // the path item's, then the operation's: the validator's order
	body         *objectCheck // nil when the operation takes no body
	bodyRequired bool
}

// paramCheck is one path, query or header parameter.
type paramCheck struct {
	in, name string
	header   string // a header's name in canonical form, as net/http keys it
	required bool
	value    valueCheck
}

// valueCheck is one string, integer or boolean schema.
type valueCheck struct {
	typ       string            // openapi3.TypeString, TypeInteger or TypeBoolean
	match     func(string) bool // the pattern's, or nil
	minLength uint64
	maxLength *uint64
	min, max  *float64
	enum      []string // the allowed strings, or nil
	schema    *openapi3.Schema
	name      string // a body field's name, as the spec spells it
}

// objectCheck is an object schema without additional properties.
type objectCheck struct {
	props    map[string]*valueCheck
	known    string   // the property names, sorted, for messages
	required []string // in the spec's order, the validator's
}

func newChecks(path *openapi3.PathItem, op *openapi3.Operation) (*opChecks, error) {
	c := &opChecks{}
	for _, ps := range []openapi3.Parameters{path.Parameters, op.Parameters} {
		for _, ref := range ps {
			p := ref.Value
			if p.In != openapi3.ParameterInPath && p.In != openapi3.ParameterInHeader && p.In != openapi3.ParameterInQuery {
				return nil, fmt.Errorf("parameter %s in %s: the gate checks path, query and header parameters only", p.Name, p.In)
			}
			if op.Parameters.GetByInAndName(p.In, p.Name) != nil && slices.Contains(path.Parameters, ref) {
				return nil, fmt.Errorf("parameter %s: overriding a path item's parameter is not supported", p.Name)
			}
			vc, err := newValueCheck(p.Schema.Value)
			if err != nil {
				return nil, fmt.Errorf("parameter %s: %w", p.Name, err)
			}
			c.params = append(c.params, paramCheck{in: p.In, name: p.Name, header: http.CanonicalHeaderKey(p.Name),
				required: p.Required, value: *vc})
		}
	}
	if rb := op.RequestBody; rb != nil {
		body := rb.Value
		if len(body.Content) != 1 || body.Content.Get("application/json") == nil {
			return nil, fmt.Errorf("%s: the gate checks application/json bodies only", op.OperationID)
		}
		s := body.Content.Get("application/json").Schema.Value
		if !s.Type.Is(openapi3.TypeObject) || s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has ||
			s.MinProps != 0 || s.MaxProps != nil || s.Nullable {
			return nil, fmt.Errorf("%s: the gate checks bodies that are objects without additional properties only", op.OperationID)
		}
		for _, name := range s.Required {
			if s.Properties[name] == nil {
				return nil, fmt.Errorf("%s: required field %s is not a property", op.OperationID, name)
			}
		}
		if body.Required && len(s.Required) == 0 {
			// A missing body is worded as its first missing field.
			return nil, fmt.Errorf("%s: the gate checks required bodies with required fields only", op.OperationID)
		}
		c.bodyRequired = body.Required
		c.body = &objectCheck{props: make(map[string]*valueCheck), known: strings.Join(slices.Sorted(maps.Keys(s.Properties)), ", "),
			required: s.Required}
		for name, ref := range s.Properties {
			vc, err := newValueCheck(ref.Value)
			if err != nil {
				return nil, fmt.Errorf("%s: field %s: %w", op.OperationID, name, err)
			}
			vc.name = name
			c.body.props[name] = vc
		}
	}
	return c, nil
}

func newValueCheck(s *openapi3.Schema) (*valueCheck, error) {
	vc := &valueCheck{schema: s, minLength: s.MinLength, maxLength: s.MaxLength, min: s.Min, max: s.Max}
	switch {
	case s.ExclusiveMin.IsSet() || s.ExclusiveMax.IsSet() || s.MultipleOf != nil ||
		s.Nullable || s.Not != nil || len(s.AllOf)+len(s.AnyOf)+len(s.OneOf) > 0 || s.Default != nil:
		return nil, fmt.Errorf("the gate does not check this schema's keywords (extend handlers/checks.go)")
	case s.Type.Is(openapi3.TypeString):
		vc.typ = openapi3.TypeString
		if s.Format != "" || s.Min != nil || s.Max != nil {
			return nil, fmt.Errorf("the gate does not check format, minimum or maximum on strings")
		}
		for _, e := range s.Enum {
			v, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("the gate checks enums of strings only")
			}
			vc.enum = append(vc.enum, v)
		}
		if _, ok := patternRules[s.Pattern]; s.Pattern != "" && !ok {
			return nil, fmt.Errorf("pattern %s has no words in patternRules: callers would be shown the regexp", s.Pattern)
		}
		switch s.Pattern {
		case "":
		case locks.NamespacePattern: // the same set, byte by byte (locks.FuzzKeyPatterns)
			vc.match = locks.ValidNamespace
		case locks.NamePattern:
			vc.match = locks.ValidName
		default:
			re, err := regexp.Compile(s.Pattern)
			if err != nil {
				return nil, err
			}
			vc.match = re.MatchString
		}
	case s.Type.Is(openapi3.TypeInteger):
		vc.typ = openapi3.TypeInteger
		if len(s.Enum) > 0 {
			return nil, fmt.Errorf("the gate checks enums of strings only")
		}
		if (s.Format != "" && s.Format != "int64") || s.Pattern != "" || s.MinLength != 0 || s.MaxLength != nil {
			return nil, fmt.Errorf("the gate checks integers of format int64 with a minimum and maximum only")
		}
	case s.Type.Is(openapi3.TypeBoolean):
		vc.typ = openapi3.TypeBoolean
		if len(s.Enum) > 0 || s.Format != "" || s.Pattern != "" || s.Min != nil || s.Max != nil || s.MinLength != 0 || s.MaxLength != nil {
			return nil, fmt.Errorf("the gate checks booleans without other keywords only")
		}
	default:
		return nil, fmt.Errorf("the gate checks strings, integers and booleans only")
	}
	return vc, nil
}

// check validates r's parameters (path values from chi) and the body
// readBody returned (nil: none).
func (c *opChecks) check(r *http.Request, body []byte, pathValue func(string) string) error {
	_, err := c.checkValue(r, body, pathValue)
	return err
}

// checkValue is check, and returns the body as encoding/json (with
// UseNumber) decodes it, or nil without a body.
func (c *opChecks) checkValue(r *http.Request, body []byte, pathValue func(string) string) (map[string]any, error) {
	var query url.Values // parsed when an operation has query parameters
	for i := range c.params {
		p := &c.params[i]
		var v string
		switch p.in {
		case openapi3.ParameterInQuery:
			if query == nil {
				query = r.URL.Query()
			}
			vs, found := query[p.name]
			if !found {
				if p.required {
					return nil, invalid("missing " + p.what())
				}
				continue
			}
			v = vs[0]
		case openapi3.ParameterInPath:
			// An empty segment counts as missing, as it did for
			// openapi3filter.
			if v = pathValue(p.name); v == "" {
				if p.required {
					return nil, invalid("missing " + p.what())
				}
				continue
			}
		default:
			vs, found := r.Header[p.header]
			if !found {
				if p.required {
					return nil, invalid("missing " + p.what())
				}
				continue
			}
			v = vs[0]
		}
		if msg := p.value.checkParam(v); msg != "" {
			if words, ok := idRules[p.name]; ok && p.value.match != nil && !p.value.match(v) {
				msg = words // ids share a pattern: say which id
			}
			return nil, invalid(p.what() + " " + msg)
		}
	}
	switch {
	case c.body == nil:
		return nil, nil
	case body == nil && c.bodyRequired:
		return nil, c.body.missing(c.body.required[0])
	case body == nil:
		return nil, nil
	}
	return c.body.checkValue(body)
}

func (p *paramCheck) what() string {
	if p.in == openapi3.ParameterInHeader {
		return p.name + " header"
	}
	return p.in + " parameter " + strconv.Quote(p.name)
}

// checkParam returns what is wrong with a parameter's value v, or "": an
// integer's is its decimal digits, a boolean's what strconv.ParseBool
// reads (as kin-openapi and the generated code read it).
func (vc *valueCheck) checkParam(v string) string {
	if vc.typ == openapi3.TypeBoolean {
		if _, err := strconv.ParseBool(v); err != nil {
			return "is invalid"
		}
		return ""
	}
	if vc.typ != openapi3.TypeInteger {
		return vc.checkString(v)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case err != nil:
		return "is invalid"
	case vc.min != nil && float64(n) < *vc.min:
		return "must be at least " + strconv.FormatFloat(*vc.min, 'f', -1, 64)
	case vc.max != nil && float64(n) > *vc.max:
		return "must be at most " + strconv.FormatFloat(*vc.max, 'f', -1, 64)
	}
	return ""
}

// checkString returns what is wrong with v for a string schema, or "".
func (vc *valueCheck) checkString(v string) string {
	if vc.minLength > 0 || vc.maxLength != nil {
		n := uint64(utf8.RuneCountInString(v))
		if n < vc.minLength {
			if vc.minLength == 1 {
				return "must not be empty"
			}
			return fmt.Sprintf("must be at least %d characters long", vc.minLength)
		}
		if vc.maxLength != nil && n > *vc.maxLength {
			return fmt.Sprintf("must be at most %d characters long", *vc.maxLength)
		}
	}
	if vc.match != nil && !vc.match(v) {
		return patternRules[vc.schema.Pattern]
	}
	if vc.enum != nil && !slices.Contains(vc.enum, v) {
		return "must be one of " + strings.Join(vc.enum, ", ")
	}
	return ""
}

// patternRules says each pattern of openapi.yaml in words, as a caller
// who got it wrong needs to read it: the regexp is the contract, not an
// explanation. newChecks refuses a pattern that has none.
var patternRules = map[string]string{
	locks.NamespacePattern: "must be " + locks.NamespaceRule,
	locks.NamePattern:      "must be " + locks.NameRule,
	`^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$`: "must be " + idempotencyKeyRule,
	"^(=|[A-Za-z0-9_-]+)$": `must be "=" (the acquire's own hold) or the "hold" of a re-entry's answer`,
	"^[A-Za-z0-9_-]{22}$":  "must be a ticket id: the 22 characters after /tickets/ in the Location of the 202",
	"^[A-Za-z0-9_.:/,-]+$": "must be 1 to 16 locks, namespace/name separated by commas",
}

// idRules say, by parameter name, what an id that does not match its
// pattern must be: ticket and session ids share one pattern.
var idRules = map[string]string{
	"ticket":  patternRules["^[A-Za-z0-9_-]{22}$"],
	"session": "must be a session id: the session of the 201 of POST /sessions (22 characters)",
}

// checkValue decodes the body readBody left (one JSON value, no repeated
// keys), checks it, and returns it as encoding/json (with UseNumber)
// decodes it.
func (oc *objectCheck) checkValue(data []byte) (map[string]any, error) {
	if obj, handled, err := oc.checkFlat(data); handled {
		return obj, err
	}
	return oc.checkDecoded(data)
}

// checkDecoded is check by way of encoding/json.
func (oc *objectCheck) checkDecoded(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil, invalid("the request body must be a JSON object")
	}
	obj, ok := v.(map[string]any)
	switch {
	case v == nil:
		return nil, invalid("the request body is invalid")
	case !ok:
		return nil, invalid("the request body must be a JSON object")
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		vc := oc.props[k]
		if vc == nil {
			return nil, invalid(fmt.Sprintf("the request body has unknown field %s; known fields: %s", quoteShort(k), oc.known))
		}
		if msg := vc.checkJSON(obj[k]); msg != "" {
			return nil, invalid("field " + strconv.Quote(k) + " " + msg)
		}
	}
	for _, k := range oc.required {
		if _, ok := obj[k]; !ok {
			return nil, oc.missing(k)
		}
	}
	return obj, nil
}

func (oc *objectCheck) missing(field string) error {
	return invalid("field " + strconv.Quote(field) + " is required")
}

// checkFlat checks the usual body, a flat object (see scanFlat), without
// encoding/json: the same checks, in the same order, on the values
// encoding/json would give, which it returns. handled=false leaves it to
// the decoder.
func (oc *objectCheck) checkFlat(data []byte) (obj map[string]any, handled bool, err error) {
	var fields [maxFlatFields]flatField
	n, ok := parseFlat(data, &fields)
	if !ok {
		return nil, false, nil
	}
	fs := fields[:n]
	slices.SortFunc(fs, func(a, b flatField) int { return bytes.Compare(a.key, b.key) })
	for i, f := range fs {
		if i > 0 && bytes.Equal(fs[i-1].key, f.key) {
			return nil, false, nil // repeated: readBody refuses it first
		}
	}
	obj = make(map[string]any, n)
	text := string(data) // one allocation for the values' strings and numbers
	for _, f := range fs {
		vc := oc.props[string(f.key)]
		v, ok := flatValue(text, f)
		if !ok {
			return nil, false, nil
		}
		if vc == nil {
			k := string(f.key)
			return nil, true, invalid(fmt.Sprintf("the request body has unknown field %s; known fields: %s", quoteShort(k), oc.known))
		}
		if msg := vc.checkJSON(v); msg != "" {
			return nil, true, invalid("field " + strconv.Quote(vc.name) + " " + msg)
		}
		obj[vc.name] = v // the spec's string: no allocation for the key
	}
	for _, k := range oc.required {
		if _, ok := obj[k]; !ok {
			return nil, true, oc.missing(k)
		}
	}
	return obj, true, nil
}

// checkJSON returns what is wrong with a decoded JSON value, or "".
func (vc *valueCheck) checkJSON(v any) string {
	if vc.enum != nil { // before the type, as kin-openapi checks
		if s, ok := v.(string); !ok || !slices.Contains(vc.enum, s) {
			return "must be one of " + strings.Join(vc.enum, ", ")
		}
	}
	if v == nil {
		return "is invalid" // not nullable
	}
	if vc.typ == openapi3.TypeBoolean {
		if _, ok := v.(bool); !ok {
			return "must be true or false"
		}
		return ""
	}
	if vc.typ == openapi3.TypeString {
		s, ok := v.(string)
		if !ok {
			return "must be of type string"
		}
		return vc.checkString(s)
	}
	n, ok := v.(json.Number)
	if !ok {
		return "must be an integer"
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) {
		return "must be an integer"
	}
	if vc.min != nil && f < *vc.min {
		return "must be at least " + strconv.FormatFloat(*vc.min, 'f', -1, 64)
	}
	if vc.max != nil && f > *vc.max {
		return "must be at most " + strconv.FormatFloat(*vc.max, 'f', -1, 64)
	}
	return ""
}

// quoteShort quotes s, cut to a length that is useful in an error message.
func quoteShort(s string) string {
	const limit = 40
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "..."
	}
	return strconv.Quote(s)
}
