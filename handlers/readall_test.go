package handlers

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadAll(t *testing.T) {
	body := `{"ttl_ms":30000,"owner":"x"}`
	for name, tc := range map[string]struct {
		r    io.Reader
		size int64
	}{
		"size right":         {strings.NewReader(body), int64(len(body))},
		"size unknown":       {strings.NewReader(body), -1},
		"size short":         {strings.NewReader(body), 3},
		"size long":          {strings.NewReader(body), 100},
		"one byte at a time": {iotest.OneByteReader(strings.NewReader(body)), int64(len(body))},
		"data with EOF":      {iotest.DataErrReader(strings.NewReader(body)), int64(len(body))},
		"too large to trust": {strings.NewReader(body), MaxBodyBytes + 1},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := readAll(tc.r, tc.size)
			if err != nil || !bytes.Equal(got, []byte(body)) {
				t.Fatalf("got %q, %v; want %q", got, err, body)
			}
		})
	}
	if _, err := readAll(iotest.ErrReader(io.ErrUnexpectedEOF), 10); err != io.ErrUnexpectedEOF {
		t.Fatalf("got %v, want the reader's error", err)
	}
}

// TestReadBodyLimit: a body over MaxBodyBytes is refused whether its
// length was announced or not (chunked), and one at the limit is read.
func TestReadBodyLimit(t *testing.T) {
	at := `{"owner":"x"}` + strings.Repeat(" ", MaxBodyBytes-len(`{"owner":"x"}`))
	for name, tc := range map[string]struct {
		body   string
		length int64
		want   error
	}{
		"announced, at the limit": {at, int64(len(at)), nil},
		"chunked, at the limit":   {at, -1, nil},
		"announced, over":         {at + " ", int64(len(at)) + 1, errTooLarge},
		"chunked, over":           {at + " ", -1, errTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/x", io.NopCloser(strings.NewReader(tc.body)))
			r.ContentLength = tc.length
			data, _, err := readBody(httptest.NewRecorder(), r)
			if err != tc.want {
				t.Fatalf("got error %v, want %v", err, tc.want)
			}
			if err == nil && string(data) != tc.body {
				t.Fatalf("got %d bytes, want %d", len(data), len(tc.body))
			}
		})
	}
}
