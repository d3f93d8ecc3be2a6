package handlers

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
)

// validationError turns a kin-openapi validation failure into an invalid
// request in our own words. Library messages are not shown: they are not
// ours to keep stable, and some quote the offending input.
func validationError(err error) error {
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
		return "must match " + s.Pattern
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

// quoteShort quotes s, cut to a length that is useful in an error message.
func quoteShort(s string) string {
	const limit = 40
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "..."
	}
	return strconv.Quote(s)
}
