package handlers

import (
	"encoding/json"
	"unicode/utf8"
)

// Fast path. The usual body, one flat object of plain keys and scalar
// values, is read once and without encoding/json: scanFlat answers
// readBody's questions (a key named twice, data after the object), and
// checkFlat (checks.go) checks the values where they stand and returns
// them as encoding/json would decode them.
//
// Plain version: jsonkeys.Duplicate, jsonkeys.Trailing and syntaxError
// in readBody, and checkDecoded (encoding/json with UseNumber) in the
// checks; they still take every body the fast path leaves (nesting,
// escapes, bytes outside ASCII in a key, malformed JSON, data after the
// object).
//
// Held to it by FuzzScanFlat (scanFlat against jsonkeys.Duplicate and
// Trailing) and FuzzCheckFlat (checkFlat's error and value against
// checkDecoded's, for every operation's body), in jsonkeys_test.go.
//
// Gain, measured 2026-12-02 at 7a299a4 against the same gateway with the
// plain version for every body: gateway CPU per lock cycle (acquire and
// release; utime + stime of the gateway process) 157.0 µs plain against
// 136.2 µs (medians), the pairs' ratio 1.15 (95 % bootstrap interval
// 1.08-1.22), 20 alternating pairs of 2 to 3 s runs of the benchmark lab's
// --processes --targets embedded (docs/PERFORMANCE.md; 16 uncontended
// clients, load average 6 to 22 on 2 cores). checkFlat alone (scanFlat
// kept): 1.055 (0.99-1.18), 50 pairs, about 3 %, at the line a fast path
// has to clear. Merged CPU profiles of six runs of 4 s of each: the plain
// functions 11.5 % of the plain gateway's samples (jsonkeys and
// syntaxError 8.6, checkDecoded 2.9), scanFlat and checkFlat 2.0 % of this
// one's. BenchmarkAcquireRelease: 145 allocations and 11.8 kB per cycle
// against 67 and 6.9 kB (83 and 8.0 kB with checkFlat alone off); process
// CPU per cycle 39.4 µs against 21.9 µs.

// scanFlat answers jsonkeys.Duplicate and jsonkeys.Trailing in one pass, without
// allocating, for the bodies the API takes: one flat object whose keys
// are plain strings and whose values are scalars, followed by nothing
// but white space. For anything else (nesting, escapes, bytes outside
// ASCII in a key, malformed JSON, data after the object) it returns
// ok=false, and the caller asks the two functions, which decode token by
// token (the token decoder was most of readBody's cost).
// FuzzScanFlat holds it to them.
func scanFlat(data []byte) (key string, dup, ok bool) {
	var fields [maxFlatFields]flatField
	n, ok := parseFlat(data, &fields)
	if !ok {
		return "", false, false
	}
	for i := 1; i < n; i++ {
		for _, f := range fields[:i] {
			if string(f.key) == string(fields[i].key) {
				return string(f.key), true, true
			}
		}
	}
	return "", false, true
}

// maxFlatFields is the most fields a flat body may have; the API's bodies
// have at most three.
const maxFlatFields = 8

// flatField is one key and its value, as they stand in the body: a key
// without its quotes, a value with them for a string; at is where the
// value starts in the body.
type flatField struct {
	key, value []byte
	at         int
}

// parseFlat reads a flat body (see scanFlat) into fields, and returns how
// many it has, or ok=false.
func parseFlat(data []byte, fields *[maxFlatFields]flatField) (n int, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return 0, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		i++
	} else {
		for {
			ks, ke, next, good := plainString(data, i, true)
			if !good || n == maxFlatFields {
				return 0, false
			}
			i = skipSpace(data, next)
			if i >= len(data) || data[i] != ':' {
				return 0, false
			}
			vs := skipSpace(data, i+1)
			if i, good = scalar(data, vs); !good {
				return 0, false
			}
			fields[n] = flatField{key: data[ks:ke], value: data[vs:i], at: vs}
			n++
			i = skipSpace(data, i)
			if i >= len(data) {
				return 0, false
			}
			if data[i] == '}' {
				i++
				break
			}
			if data[i] != ',' {
				return 0, false
			}
			i = skipSpace(data, i+1)
		}
	}
	if skipSpace(data, i) != len(data) {
		return 0, false // data after the object: the slow path says so
	}
	return n, true
}

// flatValue is what encoding/json (with UseNumber) decodes field f's value
// to, or ok=false for a string that is not valid UTF-8 (which it would
// change). body is the body f was parsed from, as a string: the strings
// and numbers it returns are slices of it, one allocation for them all.
func flatValue(body string, f flatField) (any, bool) {
	v := body[f.at : f.at+len(f.value)]
	switch v[0] {
	case '"':
		s := v[1 : len(v)-1]
		if !utf8.ValidString(s) {
			return nil, false
		}
		return s, true
	case 't':
		return true, true
	case 'f':
		return false, true
	case 'n':
		return nil, true
	}
	return json.Number(v), true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string at i without escapes or control
// characters (and, for a key, only ASCII, which decodes to itself): it
// returns the content's bounds and the index after the closing quote.
func plainString(data []byte, i int, ascii bool) (start, end, next int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return 0, 0, 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return i + 1, j, j + 1, true
		case c == '\\' || c < 0x20 || (ascii && c >= 0x80):
			return 0, 0, 0, false
		}
	}
	return 0, 0, 0, false
}

// scalar reads a plain string, a number, true, false or null at i, and
// returns the index after it.
func scalar(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch c := data[i]; {
	case c == '"':
		_, _, next, ok := plainString(data, i, false)
		return next, ok
	case c == '-' || ('0' <= c && c <= '9'):
		return number(data, i)
	}
	for _, lit := range []string{"true", "false", "null"} {
		if len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit {
			return i + len(lit), true
		}
	}
	return 0, false
}

// number reads a JSON number at i: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func number(data []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(data) && '0' <= data[i] && data[i] <= '9' {
			i++
		}
		return i
	}
	if data[i] == '-' {
		i++
	}
	switch {
	case i < len(data) && data[i] == '0':
		i++
	case i < len(data) && '1' <= data[i] && data[i] <= '9':
		i = digits(i)
	default:
		return 0, false
	}
	if i < len(data) && data[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	// A number runs until a delimiter; "1x" or "01" is malformed.
	if i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r', ',', '}':
		default:
			return 0, false
		}
	}
	return i, true
}
