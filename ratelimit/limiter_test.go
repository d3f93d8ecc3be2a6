package ratelimit

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockgate/lockgate/auth"
)

// fakeClock makes l read its time from the returned pointer, in
// nanoseconds.
func fakeClock(l *SubjectLimiter) *int64 {
	var now int64
	l.now = func() int64 { return now }
	return &now
}

func TestSubjectBucket(t *testing.T) {
	l := NewSubjectLimiter(auth.Limits{Rate: 2, Burst: 3}, nil)
	now := fakeClock(l)
	alice, bob := auth.Claims{Identity: auth.Identity{Subject: "alice"}}, auth.Claims{Identity: auth.Identity{Subject: "bob"}}
	for i := range 3 {
		if err := l.Allow(alice); err != nil {
			t.Fatalf("request %d of a burst of 3: %v", i+1, err)
		}
	}
	err := l.Allow(alice)
	var le *Error
	if !errors.As(err, &le) || !errors.Is(err, ErrTooManyRequests) {
		t.Fatalf("4th request at once: got %v, want a *Error", err)
	}
	h := http.Header{}
	le.SetHeaders(h)
	for name, want := range map[string]string{
		"Retry-After":      "1",
		"RateLimit-Policy": `"rate";q=3;w=2`,
		"RateLimit":        `"rate";r=0;t=1`,
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	if err := l.Allow(bob); err != nil {
		t.Fatalf("another subject: got %v, want its own bucket", err)
	}
	otherIssuers := auth.Claims{Identity: auth.Identity{Issuer: "https://b.example", Subject: "alice"}}
	if err := l.Allow(otherIssuers); err != nil {
		t.Fatalf("alice of another issuer: got %v, want her own bucket", err)
	}
	*now += int64(499 * time.Millisecond)
	if err := l.Allow(alice); err == nil {
		t.Fatal("after 499 ms at 2/s: allowed, want still refused")
	}
	*now += int64(time.Millisecond)
	if err := l.Allow(alice); err != nil {
		t.Fatalf("after 500 ms at 2/s: %v, want one token back", err)
	}
	if err := l.Allow(alice); err == nil {
		t.Fatal("the token earned was spent: allowed, want refused")
	}
}

func TestSubjectRetryAfterRoundsUp(t *testing.T) {
	l := NewSubjectLimiter(auth.Limits{Rate: 0.25}, nil) // burst 1, a token every 4 s
	now := fakeClock(l)
	c := auth.Claims{Identity: auth.Identity{Subject: "slow"}}
	if err := l.Allow(c); err != nil {
		t.Fatal(err)
	}
	*now += int64(time.Second)
	var le *Error
	if !errors.As(l.Allow(c), &le) {
		t.Fatal("want refused")
	}
	h := http.Header{}
	le.SetHeaders(h)
	if got := h.Get("Retry-After"); got != "3" {
		t.Errorf("Retry-After 3 s before the next token: got %q, want 3", got)
	}
	if got := h.Get("RateLimit-Policy"); got != `"rate";q=1;w=4` {
		t.Errorf("RateLimit-Policy: got %q", got)
	}
}

func TestSubjectEffectiveLimits(t *testing.T) {
	for name, tc := range map[string]struct {
		defaults, rules auth.Limits
		rate, burst     float64
		maxWaiters      int
	}{
		"gateway's":              {auth.Limits{Rate: 10, Burst: 20, MaxWaiters: 5}, auth.Limits{}, 10, 20, 5},
		"burst from rate":        {auth.Limits{Rate: 2.5}, auth.Limits{}, 2.5, 3, 0},
		"slow rate, burst 1":     {auth.Limits{Rate: 0.1}, auth.Limits{}, 0.1, 1, 0},
		"rule's rate, own burst": {auth.Limits{Rate: 10, Burst: 20}, auth.Limits{Rate: 100}, 100, 100, 0},
		"rule's rate and burst":  {auth.Limits{Rate: 10, Burst: 20}, auth.Limits{Rate: 1, Burst: 4}, 1, 4, 0},
		"rule's burst only":      {auth.Limits{Rate: 10, Burst: 20}, auth.Limits{Burst: 50}, 10, 50, 0},
		"rule's waiters":         {auth.Limits{MaxWaiters: 5}, auth.Limits{MaxWaiters: 500}, 0, 0, 500},
		"rule sets, gateway not": {auth.Limits{}, auth.Limits{Rate: 3, MaxWaiters: 1}, 3, 3, 1},
	} {
		t.Run(name, func(t *testing.T) {
			l := &SubjectLimiter{defaults: tc.defaults}
			rate, burst, maxWaiters := l.effective(tc.rules)
			if rate != tc.rate || burst != tc.burst || maxWaiters != tc.maxWaiters {
				t.Fatalf("got rate %v, burst %v, waiters %d; want %v, %v, %d", rate, burst, maxWaiters, tc.rate, tc.burst, tc.maxWaiters)
			}
		})
	}
}

func TestSubjectLimiterOff(t *testing.T) {
	if l := NewSubjectLimiter(auth.Limits{}, nil); l != nil {
		t.Fatalf("no limits anywhere: got a limiter, want nil")
	}
	p, err := auth.ParsePolicy([]byte(`{"rules":[{"match":{"sub":"*"},"namespaces":["a"],"subject_max_waiters":2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if l := NewSubjectLimiter(auth.Limits{}, p); l == nil {
		t.Fatal("a rule sets a limit: got nil, want a limiter")
	}
	var l *SubjectLimiter
	w, err := l.StartWait(auth.Claims{Identity: auth.Identity{Subject: "x"}})
	if err != nil || l.Allow(auth.Claims{Identity: auth.Identity{Subject: "x"}}) != nil {
		t.Fatal("a nil limiter refused")
	}
	w.Done()
}

func TestSubjectWaiters(t *testing.T) {
	l := NewSubjectLimiter(auth.Limits{MaxWaiters: 2}, nil)
	alice := auth.Claims{Identity: auth.Identity{Subject: "alice"}}
	w1, err1 := l.StartWait(alice)
	w2, err2 := l.StartWait(alice)
	if err1 != nil || err2 != nil {
		t.Fatalf("2 waiters under a cap of 2: %v, %v", err1, err2)
	}
	_, err := l.StartWait(alice)
	var le *Error
	if !errors.As(err, &le) {
		t.Fatalf("3rd waiter: got %v, want a *Error", err)
	}
	h := http.Header{}
	le.SetHeaders(h)
	for name, want := range map[string]string{
		"Retry-After":      "1",
		"RateLimit-Policy": `"waiters";q=2;qu="concurrent-requests"`,
		"RateLimit":        `"waiters";r=0`,
	} {
		if got := h.Get(name); got != want {
			t.Errorf("%s: got %q, want %q", name, got, want)
		}
	}
	if !strings.Contains(le.Detail(), "2 acquirers waiting") {
		t.Errorf("detail %q: want it to say the cap", le.Detail())
	}
	if _, err := l.StartWait(auth.Claims{Identity: auth.Identity{Subject: "bob"}}); err != nil {
		t.Fatalf("another subject: %v", err)
	}
	if _, err := l.StartWait(auth.Claims{Identity: auth.Identity{Subject: "carol"}, Limits: auth.Limits{MaxWaiters: 3}}); err != nil {
		t.Fatalf("a rule's cap: %v", err)
	}
	w1.Done()
	w3, err := l.StartWait(alice)
	if err != nil {
		t.Fatalf("after one waiter left: %v", err)
	}
	w2.Done()
	w3.Done()
}

// TestSubjectMemoryBounded: subjects whose bucket refilled and who have
// no waiter are forgotten, those with waiters never; past maxSubjects
// active at once, the table stops growing.
func TestSubjectMemoryBounded(t *testing.T) {
	l := NewSubjectLimiter(auth.Limits{Rate: 1, Burst: 1, MaxWaiters: 10}, nil)
	now := fakeClock(l)
	waiter, err := l.StartWait(auth.Claims{Identity: auth.Identity{Subject: "waiter"}})
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Done()
	count := func() (n int) {
		for i := range l.shards {
			n += len(l.shards[i].m)
		}
		return n
	}
	for round := range 20 {
		for i := range 10_000 {
			l.Allow(auth.Claims{Identity: auth.Identity{Subject: "s" + strconv.Itoa(round) + "-" + strconv.Itoa(i)}})
		}
		*now += int64(time.Second) // every bucket refilled
	}
	if n := count(); n > 3*10_000 {
		t.Errorf("after 20 rounds of 10000 subjects, each idle after its round: %d remembered, want at most 30000", n)
	}
	for i := range 3 * maxSubjects {
		l.Allow(auth.Claims{Identity: auth.Identity{Subject: "flood-" + strconv.Itoa(i)}}) // all at once: no bucket refills
	}
	if n := count(); n > 2*maxSubjects+subjectShards {
		t.Errorf("%d subjects at once: %d remembered, want at most about 2 × %d", 3*maxSubjects, n, maxSubjects)
	}
	for i := range l.shards {
		if s, ok := l.shards[i].m[auth.Identity{Subject: "waiter"}]; ok && s != waiter.s {
			t.Error("the subject with a waiter was forgotten and made again")
		}
	}
	if waiter.s.waiting != 1 {
		t.Errorf("waiters of the subject: got %d, want 1", waiter.s.waiting)
	}
	if _, ok := waiter.sh.m[auth.Identity{Subject: "waiter"}]; !ok {
		t.Error("the subject with a waiter was forgotten")
	}
}

// TestSubjectAllowAllocs: the hot path of a known subject allocates
// nothing.
func TestSubjectAllowAllocs(t *testing.T) {
	l := NewSubjectLimiter(auth.Limits{Rate: 1e6, Burst: 1e6}, nil)
	c := auth.Claims{Identity: auth.Identity{Subject: "hot"}}
	l.Allow(c)
	if n := testing.AllocsPerRun(1000, func() { l.Allow(c) }); n != 0 {
		t.Fatalf("Allow: %v allocations per call, want 0", n)
	}
}

func BenchmarkSubjectAllow(b *testing.B) {
	l := NewSubjectLimiter(auth.Limits{Rate: 1e9, Burst: 1e9}, nil)
	c := auth.Claims{Identity: auth.Identity{Subject: "bench"}}
	for b.Loop() {
		l.Allow(c)
	}
}

func BenchmarkSubjectAllowParallel(b *testing.B) {
	l := NewSubjectLimiter(auth.Limits{Rate: 1e9, Burst: 1e9}, nil)
	b.RunParallel(func(pb *testing.PB) {
		c := auth.Claims{Identity: auth.Identity{Subject: "bench"}}
		for pb.Next() {
			l.Allow(c)
		}
	})
}

// TestSubjectCharge: a charge after the fact may take the bucket below
// empty; the subject is refused until it has earned the debt back, and a
// nil limiter or a subject without a rate is charged nothing.
func TestSubjectCharge(t *testing.T) {
	l := NewSubjectLimiter(auth.Limits{Rate: 2, Burst: 3}, nil)
	now := fakeClock(l)
	alice := auth.Claims{Identity: auth.Identity{Subject: "alice"}}
	if err := l.Allow(alice); err != nil {
		t.Fatal(err)
	}
	l.Charge(alice, 4) // 3 - 1 - 4 = -2
	if err := l.Allow(alice); err == nil {
		t.Fatal("after a charge past the bucket: allowed, want refused")
	}
	*now += int64(1499 * time.Millisecond) // -2 + 2.998
	if err := l.Allow(alice); err == nil {
		t.Fatal("after 1.499 s at 2/s: allowed, want refused until 1.5 s")
	}
	*now += int64(time.Millisecond)
	if err := l.Allow(alice); err != nil {
		t.Fatalf("after 1.5 s at 2/s: %v, want the debt paid and one token back", err)
	}
	var none *SubjectLimiter
	none.Charge(alice, 100)
	free := NewSubjectLimiter(auth.Limits{MaxWaiters: 1}, nil)
	free.Charge(alice, 100)
	if err := free.Allow(alice); err != nil {
		t.Fatalf("a subject without a rate after a charge: %v, want allowed", err)
	}
}
