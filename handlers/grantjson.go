package handlers

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"
)

// The 201 of an acquire is the gateway's most frequent body. encoding/json
// walks it by reflection and allocates as it goes (9 % of the
// gateway's CPU under contention); these append its fields in
// encoding/json's order and bytes instead. TestGrantJSON holds them to
// encoding/json for the same values, escaping included. A value they
// cannot write exactly as encoding/json would (a string that needs
// escaping, a year outside 0-9999) makes them report ok=false, and the
// caller uses encoding/json.

// appendGrant appends g as encoding/json does, or reports ok=false.
func appendGrant(b []byte, g *Grant) ([]byte, bool) {
	if g.Hold != nil { // a re-entry's: never a 201
		return b, false
	}
	b = append(b, `{"expires_at":`...)
	b, ok := appendTime(b, g.ExpiresAt)
	b = append(b, `,"fencing_token":`...)
	b = strconv.AppendInt(b, g.FencingToken, 10)
	if g.Holds != nil {
		b = append(b, `,"holds":`...)
		b = strconv.AppendInt(b, int64(*g.Holds), 10)
	}
	b = append(b, `,"lock":`...)
	b, ok2 := appendPlainString(b, g.Lock)
	if g.Mode != nil {
		b = append(b, `,"mode":`...)
		var ok3 bool
		b, ok3 = appendPlainString(b, string(*g.Mode))
		ok2 = ok2 && ok3
	}
	b = append(b, `,"renew_after_ms":`...)
	b = strconv.AppendInt(b, g.RenewAfterMs, 10)
	b = append(b, `,"token":`...)
	b, ok3 := appendPlainString(b, g.Token)
	b = append(b, `,"ttl_ms":`...)
	b = strconv.AppendInt(b, g.TtlMs, 10)
	return append(b, '}'), ok && ok2 && ok3
}

// appendSemaphoreGrant appends g as encoding/json does, or reports ok=false.
func appendSemaphoreGrant(b []byte, g *SemaphoreGrant) ([]byte, bool) {
	b = append(b, `{"expires_at":`...)
	b, ok := appendTime(b, g.ExpiresAt)
	b = append(b, `,"fencing_token":`...)
	b = strconv.AppendInt(b, g.FencingToken, 10)
	b = append(b, `,"limit":`...)
	b = strconv.AppendInt(b, int64(g.Limit), 10)
	b = append(b, `,"renew_after_ms":`...)
	b = strconv.AppendInt(b, g.RenewAfterMs, 10)
	b = append(b, `,"semaphore":`...)
	b, ok2 := appendPlainString(b, g.Semaphore)
	b = append(b, `,"token":`...)
	b, ok3 := appendPlainString(b, g.Token)
	b = append(b, `,"ttl_ms":`...)
	b = strconv.AppendInt(b, g.TtlMs, 10)
	return append(b, '}'), ok && ok2 && ok3
}

// appendJSONBody appends body as encoding/json's Marshal does, by hand for
// the grants and by encoding/json for anything else.
func appendJSONBody(b []byte, body any) ([]byte, error) {
	start, ok := len(b), false
	switch v := body.(type) {
	case Grant:
		b, ok = appendGrant(b, &v)
	case AcquireLock201JSONResponse:
		b, ok = appendGrant(b, (*Grant)(&v))
	case SemaphoreGrant:
		b, ok = appendSemaphoreGrant(b, &v)
	}
	if ok {
		return b, nil
	}
	data, err := json.Marshal(body)
	return append(b[:start], data...), err
}

// appendTime appends t as time.Time's MarshalJSON does: RFC 3339 with
// the nanoseconds it has, quoted. MarshalJSON refuses years outside
// 0-9999, so those report ok=false.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// appendPlainString appends s quoted when encoding/json would write it
// unchanged: printable ASCII without '"', '\\' or the HTML characters it
// escapes ('<', '>', '&'). Owner tokens (URL-safe base64) and lock keys
// (the spec's patterns) always are; anything else reports ok=false.
func appendPlainString(b []byte, s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), true
}

// bodyBuffers holds the buffers grants are encoded into: the response
// writer copies a body, so its buffer can serve the next one.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// contentLengths are the Content-Length values of the bodies up to
// maxSharedLength bytes, made once and shared (read-only) as the other
// header values are (see jsonContentType).
var contentLengths = func() (ls [maxSharedLength + 1][]string) {
	for n := range ls {
		ls[n] = []string{strconv.Itoa(n)}
	}
	return ls
}()

const maxSharedLength = 1023

// contentLength is the header value for a body of n bytes.
func contentLength(n int) []string {
	if n <= maxSharedLength {
		return contentLengths[n]
	}
	return []string{strconv.Itoa(n)}
}
