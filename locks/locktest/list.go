package locktest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/locks"
)

// RunList runs the listing suite. newBackend returns a backend for one
// test; tests run in parallel, each in a namespace of its own.
func RunList(t *testing.T, newBackend func(t *testing.T) locks.Backend) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, b locks.Backend, ns string)
	}{
		{"EmptyNamespaceListsNothing", testListEmpty},
		{"PagesCoverEveryHeldLock", testListPages},
		{"ListDescribesEachLock", testListDescribes},
		{"ReleasedAndExpiredLocksAreGone", testListGone},
		{"ForeignCursorsRefused", testListBadCursor},
		{"NameOrderEachLockOnce", testListNameOrder},
		{"SharedLockListedOnce", testListShared},
		{"RenewedAndReenteredLocksStayListed", testListExtended},
		{"HandedOverLockListed", testListHandedOver},
		{"PageCountsWhatItExamined", testListExamined},
		{"NamespacesNameHeldOnes", testNamespaces},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, newBackend(t), UniqueNamespace(t))
		})
	}
}

// UniqueNamespace returns a namespace no other test in this process uses.
func UniqueNamespace(t testing.TB) string {
	ns := fmt.Sprintf("list-%d-%d", time.Now().UnixNano(), keySeq.Add(1))
	if !locks.ValidNamespace(ns) {
		t.Fatalf("namespace %q is invalid", ns)
	}
	return ns
}

// ListAll follows the pages of a listing of ns, limit locks a page, to the
// end, and returns the locks by name (a lock listed twice counts once) and
// the number of pages. It fails the test on a page longer than limit, or a
// listing that does not end within 10000 pages.
func ListAll(t testing.TB, l locks.Lister, ns string, limit int) (map[string]locks.Listed, int) {
	t.Helper()
	all := make(map[string]locks.Listed)
	cursor := ""
	for pages := 1; pages <= 10000; pages++ {
		page, err := l.List(context.Background(), ns, cursor, limit)
		if err != nil {
			t.Fatalf("list %s, page %d: %v", ns, pages, err)
		}
		if len(page.Locks) > limit {
			t.Fatalf("page %d: got %d locks, want at most %d", pages, len(page.Locks), limit)
		}
		for _, l := range page.Locks {
			if l.Key.Namespace != ns {
				t.Fatalf("page %d: got lock %s, want only namespace %s", pages, l.Key, ns)
			}
			all[l.Key.Name] = l
		}
		if page.Next == "" {
			return all, pages
		}
		if len(page.Next) > locks.MaxCursorLen {
			t.Fatalf("page %d: cursor of %d bytes, want at most %d", pages, len(page.Next), locks.MaxCursorLen)
		}
		cursor = page.Next
	}
	t.Fatalf("listing %s did not end within 10000 pages", ns)
	return nil, 0
}

func testListEmpty(t *testing.T, b locks.Backend, ns string) {
	got, pages := ListAll(t, b, ns, 10)
	if len(got) != 0 {
		t.Fatalf("got %d locks in an unused namespace, want 0", len(got))
	}
	t.Logf("%d pages", pages)
}

// testListPages: locks of the namespace, and nothing else (another
// namespace, whose name starts alike; a semaphore of the same name), over
// pages of several sizes.
func testListPages(t *testing.T, b locks.Backend, ns string) {
	const n = 23
	want := make(map[string]bool)
	for i := range n {
		name := fmt.Sprintf("job-%02d", i)
		MustAcquire(t, b, locks.Key{Namespace: ns, Name: name}, req(time.Minute))
		want[name] = true
	}
	MustAcquire(t, b, locks.Key{Namespace: ns + "x", Name: "job-00"}, req(time.Minute))
	MustAcquirePermit(t, b, locks.Key{Namespace: ns, Name: "sem"}, permitReq(2, time.Minute, 0))
	for _, limit := range []int{1, 7, 23, 100} {
		got, pages := ListAll(t, b, ns, limit)
		if len(got) != n {
			t.Errorf("limit %d: got %d locks, want %d: %v", limit, len(got), n, names(got))
		}
		for name := range got {
			if !want[name] {
				t.Errorf("limit %d: got lock %q, want only the namespace's locks", limit, name)
			}
		}
		if pages < (n+limit-1)/limit {
			t.Errorf("limit %d: got %d pages, want at least %d", limit, pages, (n+limit-1)/limit)
		}
	}
}

func names(m map[string]locks.Listed) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	return s
}

// testListDescribes: each item says what Inspect says of the lock.
func testListDescribes(t *testing.T, b locks.Backend, ns string) {
	key := locks.Key{Namespace: ns, Name: "report"}
	g := MustAcquire(t, b, key, locks.AcquireRequest{TTL: time.Minute, Subject: "alice", Owner: "nightly"})
	if _, err := b.Reenter(context.Background(), key, g.Token, time.Minute, locks.Exclusive); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiting := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, key, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute})
		waiting <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	var got locks.Listed
	for {
		all, _ := ListAll(t, b, ns, 10)
		got = all["report"]
		if got.Waiters == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond) // polling for the waiter to queue, not synchronising
	}
	want, err := b.Inspect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case got.Key != key:
		t.Errorf("got key %v, want %v", got.Key, key)
	case got.Subject != "alice" || got.Owner != "nightly":
		t.Errorf("got subject %q owner %q, want alice, nightly", got.Subject, got.Owner)
	case got.FencingToken != g.FencingToken:
		t.Errorf("got fencing token %d, want %d", got.FencingToken, g.FencingToken)
	case got.Holds != 2:
		t.Errorf("got holds %d, want 2", got.Holds)
	case got.Waiters != 1:
		t.Errorf("got waiters %d, want 1", got.Waiters)
	case got.TTL <= 0 || got.TTL > time.Minute:
		t.Errorf("got ttl %s, want within (0, 1m]", got.TTL)
	case !got.AcquiredAt.Equal(want.AcquiredAt):
		t.Errorf("got acquired at %s, want %s", got.AcquiredAt, want.AcquiredAt)
	}
	if s := fmt.Sprintf("%+v", got); strings.Contains(s, g.Token) {
		t.Errorf("a listed lock carries its owner token: %s", s)
	}
	cancel()
	<-waiting
}

func testListGone(t *testing.T, b locks.Backend, ns string) {
	kept := MustAcquire(t, b, locks.Key{Namespace: ns, Name: "kept"}, req(time.Minute))
	released := MustAcquire(t, b, locks.Key{Namespace: ns, Name: "released"}, req(time.Minute))
	MustAcquire(t, b, locks.Key{Namespace: ns, Name: "expired"}, req(50*time.Millisecond))
	if _, err := b.Release(context.Background(), locks.Key{Namespace: ns, Name: "released"}, released.Token); err != nil {
		t.Fatal(err)
	}
	WaitUntilFree(t, b, locks.Key{Namespace: ns, Name: "expired"})
	got, _ := ListAll(t, b, ns, 10)
	if len(got) != 1 || got["kept"].FencingToken != kept.FencingToken {
		t.Fatalf("got %v, want only kept", names(got))
	}
}

func testListBadCursor(t *testing.T, b locks.Backend, ns string) {
	enc := base64.RawURLEncoding.EncodeToString
	for _, c := range []string{"x", "%%%", enc([]byte("x1\x00a")), enc([]byte("m1\x00a\x00b")), enc([]byte("m1\x00.bad")),
		enc([]byte("r1\x00node\x00NaN\x00")), enc([]byte("r1\x00\x000\x00")), strings.Repeat("A", 600)} {
		if _, err := b.List(context.Background(), ns, c, 10); !errors.Is(err, locks.ErrInvalid) {
			t.Errorf("cursor %q: got error %v, want %v", c, err, locks.ErrInvalid)
		}
	}
	if _, err := b.List(context.Background(), ns, "", 0); !errors.Is(err, locks.ErrInvalid) {
		t.Errorf("limit 0: got error %v, want %v", err, locks.ErrInvalid)
	}
	if _, err := b.List(context.Background(), "Bad", "", 1); !errors.Is(err, locks.ErrInvalid) {
		t.Errorf("namespace Bad: got error %v, want %v", err, locks.ErrInvalid)
	}
}

// listNames follows the pages of a listing of ns, limit locks a page, and
// returns the names in the order listed, each as often as listed.
func listNames(t *testing.T, l locks.Lister, ns string, limit int) []string {
	t.Helper()
	var got []string
	cursor := ""
	for range 10000 {
		page, err := l.List(context.Background(), ns, cursor, limit)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page.Locks {
			got = append(got, l.Key.Name)
		}
		if cursor = page.Next; cursor == "" {
			return got
		}
	}
	t.Fatalf("listing %s did not end within 10000 pages", ns)
	return nil
}

// testListNameOrder: both backends list in name order, each lock once,
// whatever the page size; names that start alike included.
func testListNameOrder(t *testing.T, b locks.Backend, ns string) {
	want := []string{"a", "a-b", "a.b", "a0", "aa", "b", "b:c", "job-1", "job-10", "job-2"}
	for _, name := range slices.Backward(want) {
		MustAcquire(t, b, locks.Key{Namespace: ns, Name: name}, req(time.Minute))
	}
	for _, limit := range []int{1, 2, 3, 100} {
		if got := listNames(t, b, ns, limit); !slices.Equal(got, want) {
			t.Errorf("limit %d: got %v, want %v", limit, got, want)
		}
	}
}

// testListShared: a lock with several shared holders is one item, listed
// once however the pages fall, with every holder; the locks beside it are
// listed too.
func testListShared(t *testing.T, b locks.Backend, ns string) {
	shared := locks.Key{Namespace: ns, Name: "m"}
	for range 5 {
		MustAcquire(t, b, shared, locks.AcquireRequest{TTL: time.Minute, Mode: locks.Shared})
	}
	MustAcquire(t, b, locks.Key{Namespace: ns, Name: "a"}, req(time.Minute))
	MustAcquire(t, b, locks.Key{Namespace: ns, Name: "z"}, req(time.Minute))
	for _, limit := range []int{1, 2, 100} {
		if got := listNames(t, b, ns, limit); !slices.Equal(got, []string{"a", "m", "z"}) {
			t.Errorf("limit %d: got %v, want [a m z]", limit, got)
		}
	}
	all, _ := ListAll(t, b, ns, 10)
	if got := all["m"]; got.Mode != locks.Shared || len(got.Holders) != 5 {
		t.Errorf("got mode %s with %d holders, want shared with 5", got.Mode, len(got.Holders))
	}
}

// testListExtended: a lock whose lease was extended (renewed, re-entered)
// past the lease it was granted with is listed after that first lease.
// The first lease is 150 ms, and longer on a machine so busy that it ended
// before the renewal came (CI: "re-enter lock .../reentered: not the
// holder (expired)"): each try in a namespace of its own.
func testListExtended(t *testing.T, b locks.Backend, ns string) {
	for try, short := range []time.Duration{150 * time.Millisecond, time.Second, 5 * time.Second} {
		space := fmt.Sprintf("%s-%d", ns, try)
		renewed := locks.Key{Namespace: space, Name: "renewed"}
		reentered := locks.Key{Namespace: space, Name: "reentered"}
		g := MustAcquire(t, b, renewed, req(short))
		_, err := b.Renew(context.Background(), renewed, g.Token, time.Minute)
		if err == nil {
			g = MustAcquire(t, b, reentered, req(short))
			_, err = b.Reenter(context.Background(), reentered, g.Token, time.Minute, locks.Exclusive)
		}
		if nh := (*locks.NotHolderError)(nil); errors.As(err, &nh) && nh.Reason == locks.ReasonExpired {
			t.Logf("a %v lease ended before its extension (a busy machine): again with a longer one", short)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * short) // the first leases pass: waiting for time, not for an event
		if got := listNames(t, b, space, 10); !slices.Equal(got, []string{"reentered", "renewed"}) {
			t.Errorf("got %v, want [reentered renewed]", got)
		}
		return
	}
	t.Fatal("even a 5 s lease ended before its extension")
}

// testListHandedOver: a grant handed to a waiter by a release is listed
// once the waiter's acquire has returned.
func testListHandedOver(t *testing.T, b locks.Backend, ns string) {
	key := locks.Key{Namespace: ns, Name: "handed"}
	g := MustAcquire(t, b, key, req(time.Minute))
	waiter := AcquireAsync(t.Context(), b, key, locks.AcquireRequest{TTL: time.Minute, Wait: 20 * time.Second})
	WaitUntilQueued(t, b, key, 1)
	if _, err := b.Release(context.Background(), key, g.Token); err != nil {
		t.Fatal(err)
	}
	res := <-waiter
	if res.Err != nil {
		t.Fatalf("waiter: %v", res.Err)
	}
	all, _ := ListAll(t, b, ns, 10)
	if got := all["handed"]; got.FencingToken != res.Grant.FencingToken {
		t.Errorf("got %v listed with fencing token %d, want handed with %d", names(all), got.FencingToken, res.Grant.FencingToken)
	}
}

// testListExamined: a page says how many locks it looked at, at least
// those it lists, and no more than its limit.
func testListExamined(t *testing.T, b locks.Backend, ns string) {
	for i := range 3 {
		MustAcquire(t, b, locks.Key{Namespace: ns, Name: fmt.Sprintf("x%d", i)}, req(time.Minute))
	}
	page, err := b.List(context.Background(), ns, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	if page.Examined < len(page.Locks) || page.Examined > 2 {
		t.Errorf("got %d examined for %d listed, limit 2: want from %d to 2", page.Examined, len(page.Locks), len(page.Locks))
	}
}

// testNamespaces: a backend that names its namespaces (NamespaceLister)
// names one once a lock is held in it, in order, and honours the limit.
func testNamespaces(t *testing.T, b locks.Backend, ns string) {
	nl, ok := b.(locks.NamespaceLister)
	if !ok {
		t.Skip("the backend does not name its namespaces")
	}
	other := ns + "-b"
	for _, n := range []string{other, ns} {
		if _, err := b.Acquire(context.Background(), locks.Key{Namespace: n, Name: "x"}, locks.AcquireRequest{TTL: time.Minute}); err != nil {
			t.Fatalf("acquire in %s: %v", n, err)
		}
	}
	got, err := nl.Namespaces(context.Background(), 100000)
	if err != nil {
		t.Fatalf("Namespaces: %v", err)
	}
	i, j := slices.Index(got, ns), slices.Index(got, other)
	if i < 0 || j < i || !slices.IsSorted(got) {
		t.Fatalf("Namespaces: got %q, want %s then %s, in order", got, ns, other)
	}
	if got, err := nl.Namespaces(context.Background(), 1); err != nil || len(got) != 1 {
		t.Fatalf("Namespaces with limit 1: got %q, %v; want one", got, err)
	}
	if _, err := nl.Namespaces(context.Background(), 0); !errors.Is(err, locks.ErrInvalid) {
		t.Fatalf("Namespaces with limit 0: got %v, want ErrInvalid", err)
	}
}
