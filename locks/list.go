package locks

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
)

// Lister lists the held locks of a namespace, a page at a time.
type Lister interface {
	// List returns up to limit held locks of namespace (limit at least
	// 1), from where cursor left off ("" for the start), and the cursor of
	// the next page in Page.Next ("" when the listing is done). It never
	// reveals an owner token. A cursor that no List returned gets
	// ErrInvalid.
	//
	// Locks come in name order, each at most once in a listing. A page
	// may hold fewer than limit locks, even none, while Next is set: each
	// page does a bounded amount of work (the Redis backend reads an index
	// of the names in use lately, which names free locks too, passed
	// over). A lock held throughout the listing by one grant appears, once
	// the call that made the grant has returned; with Redis Cluster,
	// unless the index's entry could not be written (see docs/SAFETY.md,
	// "Listing").
	// A lock taken or freed during the listing may or may not appear.
	List(ctx context.Context, namespace, cursor string, limit int) (Page, error)
}

// Page is one page of a listing.
type Page struct {
	Locks []Listed
	// Next is the cursor of the next page; "" when there is none.
	Next string
	// Examined is how many locks the page looked at, listed or found
	// free: what it cost the backend, about one inspect each. The gateway
	// charges the caller's rate by it.
	Examined int
}

// Listed is one held lock of a listing: its key and what Inspect says.
type Listed struct {
	Key Key
	Info
}

// MaxCursorLen bounds the cursors List returns (and so the ones it
// accepts): a lock name and a part of a token hash.
const MaxCursorLen = 512

// The two backends' cursors are base64url of fields joined by NUL bytes,
// after a tag that says whose they are, so that one backend refuses the
// other's.
const (
	CursorMemory = "m1"
	CursorRedis  = "r2"
)

func EncodeCursor(tag string, fields ...string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tag + "\x00" + strings.Join(fields, "\x00")))
}

// DecodeCursor returns the n fields of a cursor with the given tag.
func DecodeCursor(cursor, tag string, n int) ([]string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	parts := strings.Split(string(raw), "\x00")
	if err != nil || len(cursor) > MaxCursorLen || len(parts) != n+1 || parts[0] != tag {
		return nil, ErrBadCursor
	}
	return parts[1:], nil
}

var ErrBadCursor = fmt.Errorf("%w: the cursor is not one a listing returned", ErrInvalid)

func CheckList(namespace string, limit int) error {
	if !ValidNamespace(namespace) {
		return fmt.Errorf("%w: namespace must match %s", ErrInvalid, NamespacePattern)
	}
	if limit < 1 {
		return fmt.Errorf("%w: limit must be at least 1", ErrInvalid)
	}
	return nil
}

// NamespaceLister names the namespaces that have held locks, so that a
// viewer granted a glob (etl-*, *) can be offered the namespaces it
// matches. The dashboard uses it; the API does not.
type NamespaceLister interface {
	// Namespaces returns, in order, up to limit namespaces (limit at
	// least 1) in which a lock is held. Like List, it may name a
	// namespace whose last lease ended lately: the Redis backend names the
	// namespaces whose index of lock names exists, which outlives its last
	// lease by up to a fence retention. It reads every key name of the Redis, a page
	// at a time: callers cache the answer, not call it per request.
	Namespaces(ctx context.Context, limit int) ([]string, error)
}
