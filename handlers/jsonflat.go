package handlers

// scanFlat answers duplicateKey and trailingData in one pass, without
// allocating, for the bodies the API takes: one flat object whose keys
// are plain strings and whose values are scalars, followed by nothing
// but white space. For anything else (nesting, escapes, bytes outside
// ASCII in a key, malformed JSON, data after the object) it returns
// ok=false, and the caller asks the two functions, which decode token by
// token (the token decoder was most of readBody's cost, issue 10).
// FuzzScanFlat holds it to them.
func scanFlat(data []byte) (key string, dup, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return "", false, false
	}
	i = skipSpace(data, i+1)
	// Keys seen so far, as offsets into data: a flat body has few.
	var seen [8][2]int
	n := 0
	if i < len(data) && data[i] == '}' {
		i++
	} else {
		for {
			ks, ke, next, good := plainString(data, i, true)
			if !good {
				return "", false, false
			}
			k := data[ks:ke]
			for _, s := range seen[:min(n, len(seen))] {
				if string(data[s[0]:s[1]]) == string(k) && !dup {
					key, dup = string(k), true
				}
			}
			if n >= len(seen) {
				return "", false, false
			}
			seen[n] = [2]int{ks, ke}
			n++
			i = skipSpace(data, next)
			if i >= len(data) || data[i] != ':' {
				return "", false, false
			}
			if i, good = scalar(data, skipSpace(data, i+1)); !good {
				return "", false, false
			}
			i = skipSpace(data, i)
			if i >= len(data) {
				return "", false, false
			}
			if data[i] == '}' {
				i++
				break
			}
			if data[i] != ',' {
				return "", false, false
			}
			i = skipSpace(data, i+1)
		}
	}
	if skipSpace(data, i) != len(data) {
		return "", false, false // data after the object: the slow path says so
	}
	if dup {
		return key, true, true
	}
	return "", false, true
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
