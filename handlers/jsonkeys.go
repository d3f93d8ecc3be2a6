package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// duplicateKey returns the first key that appears twice in one JSON object
// of data, at any depth. encoding/json keeps the last of duplicate keys
// silently, so {"ttl_ms":1000,"ttl_ms":3600000} would mean whatever the last
// parser in a chain of proxies decides; we refuse it instead. Malformed
// JSON yields no duplicate: the schema validation that follows reports it.
func duplicateKey(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	// One entry per open container: the keys seen so far for an object,
	// nil for an array.
	var stack []map[string]struct{}
	expectKey := false // the next string token of the top object is a key
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, make(map[string]struct{}))
				expectKey = true
				continue
			case '[':
				stack = append(stack, nil)
			case '}', ']':
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					return "", false
				}
			}
		case string:
			if expectKey {
				top := stack[len(stack)-1]
				if _, seen := top[v]; seen {
					return v, true
				}
				top[v] = struct{}{}
				expectKey = false
				continue
			}
		}
		if len(stack) == 0 {
			return "", false // a scalar at the top level
		}
		// After a value inside an object, the next string is a key.
		expectKey = stack[len(stack)-1] != nil
	}
}

// trailingData reports whether data holds anything but white space after
// its first JSON value. encoding/json stops at the end of the first value,
// so {"ttl_ms":5000}{"ttl_ms":1} would be taken as the first object, and
// another parser may take the second. Malformed JSON yields false: the
// schema validation reports it.
func trailingData(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	var first json.RawMessage
	if dec.Decode(&first) != nil {
		return false
	}
	_, err := dec.Token()
	return !errors.Is(err, io.EOF)
}
