// Package jsonkeys finds what encoding/json lets through silently and
// parsers disagree on: a key named twice in one object, and data after the
// first value. The gateway refuses both in request bodies and in token
// payloads.
package jsonkeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// Duplicate returns the first key that appears twice in one JSON object of
// data, at any depth, comparing keys after unescaping ("n\u0073" is "ns").
// encoding/json keeps the last of duplicate keys, so {"ns":["a"],"ns":["*"]}
// means whatever the last parser in a chain decides; we refuse it instead.
// Malformed JSON yields no duplicate: the caller's parser reports it.
func Duplicate(data []byte) (string, bool) {
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

// Trailing reports whether data holds anything but white space after its
// first JSON value: a json.Decoder stops there, another parser may read on.
// Malformed JSON yields false: the caller's parser reports it.
func Trailing(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	var first json.RawMessage
	if dec.Decode(&first) != nil {
		return false
	}
	_, err := dec.Token()
	return !errors.Is(err, io.EOF)
}
