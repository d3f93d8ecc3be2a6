package handlers

import (
	"bytes"
	"io"
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
