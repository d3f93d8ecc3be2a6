package e2e

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/cmd/gateway/app"
	"github.com/lockgate/lockgate/internal/gatewaytest"
	"github.com/lockgate/lockgate/internal/redistest"
)

// wantRateLimited checks that r is a 429 too_many_requests for the
// subject's rate, with the quota policy q and window w, and returns its
// Retry-After.
func wantRateLimited(t *testing.T, r response, q, w int) int {
	t.Helper()
	wantProblem(t, r, http.StatusTooManyRequests, "too_many_requests")
	retry, err := strconv.Atoi(r.header.Get("Retry-After"))
	if err != nil || retry < 1 || retry > w {
		t.Fatalf("Retry-After: got %q, want whole seconds from 1 to %d", r.header.Get("Retry-After"), w)
	}
	if got, want := r.header.Get("RateLimit-Policy"), `"rate";q=`+strconv.Itoa(q)+`;w=`+strconv.Itoa(w); got != want {
		t.Fatalf("RateLimit-Policy: got %q, want %q", got, want)
	}
	if got, want := r.header.Get("RateLimit"), `"rate";r=0;t=`+strconv.Itoa(retry); got != want {
		t.Fatalf("RateLimit: got %q, want %q", got, want)
	}
	return retry
}

// TestSubjectRate: a subject past its burst gets 429 with Retry-After and
// the RateLimit fields, on every call (inspect too) and whichever lock it
// names, while another subject goes on as before; what a refused call
// names is never created, so a subject flooding new lock names leaves
// Redis as it was.
func TestSubjectRate(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t)
	// 0.01/s: no token comes back during the test, however slow the machine.
	gw := startGateway(t, "--redis-url", rdb.URL(), "--subject-rate", "0.01", "--subject-burst", "5")
	alice, bob := bearer(token(t, jwt.MapClaims{"sub": "alice"})), bearer(token(t, jwt.MapClaims{"sub": "bob"}))
	granted := 0
	names := map[string]bool{} // the hash tags of the locks granted
	for i := range 100 {
		r := call(t, "POST", gw.URL+"/locks/flood/n-"+strconv.Itoa(i), `{"ttl_ms":60000}`, alice...)
		switch r.status {
		case http.StatusCreated:
			granted++
			names["{flood/n-"+strconv.Itoa(i)+"}"] = true
		default:
			wantRateLimited(t, r, 5, 500)
		}
	}
	if granted != 5 {
		t.Fatalf("alice's grants out of 100 calls at once: got %d, want the burst, 5", granted)
	}
	// Keys of the 5 locks granted (the lock, its fence, history and grant
	// record...) and the namespace's index of held locks, nothing for the
	// 95 others; and the layout's number, which the gateway writes at start.
	names["{flood}"] = true
	for _, k := range rdb.Client(t).Keys(t.Context(), "*").Val() {
		if k == "lockgate:layout" {
			continue
		}
		tag := k[strings.Index(k, "{") : strings.Index(k, "}")+1]
		if !names[tag] {
			t.Fatalf("Redis holds %q after 5 grants: a refused call left a key", k)
		}
	}
	wantRateLimited(t, call(t, "GET", gw.URL+"/locks/flood/n-0", "", alice...), 5, 500)
	wantProblem(t, call(t, "GET", gw.URL+"/locks/flood/n-99", "", bob...), http.StatusNotFound, "not_held")
	for i := range 4 {
		if r := call(t, "POST", gw.URL+"/locks/flood/bob-"+strconv.Itoa(i), "", bob...); r.status != http.StatusCreated {
			t.Fatalf("bob's acquire %d: got %d %s, want 201", i+1, r.status, r.body)
		}
	}
	// Refusals happen before validation and before the namespace check:
	// they cost the gateway nothing else.
	wantRateLimited(t, call(t, "POST", gw.URL+"/locks/Bad_NS/x", `{"ttl_ms":-1}`, alice...), 5, 500)
	// Unauthenticated calls are not counted against anyone.
	wantProblem(t, call(t, "POST", gw.URL+"/locks/flood/x", ""), http.StatusUnauthorized, "unauthorized")
}

// TestSubjectRatePerRule: policy rules set their own limits for the
// subjects they match, lower or higher than the gateway's, and the
// gateway's apply to everyone else, tokens with an ns claim included.
func TestSubjectRatePerRule(t *testing.T) {
	t.Parallel()
	policy := writePolicy(t, `{"rules": [
		{"match": {"sub": "slow-*"}, "namespaces": ["rl"], "subject_rate": 0.01, "subject_burst": 2},
		{"match": {"sub": "fast-*"}, "namespaces": ["rl"], "subject_rate": 1000, "subject_burst": 1000},
		{"match": {"sub": "*"}, "namespaces": ["rl"]}
	]}`)
	gw := startGateway(t, "--policy", policy, "--subject-rate", "0.01", "--subject-burst", "3")
	sub := func(name string) []string { return bearer(token(t, jwt.MapClaims{"sub": name, "ns": nil})) }
	// allowed counts the calls subject may make at once, up to 30.
	allowed := func(auth []string) (n int, last response) {
		for n < 30 {
			last = call(t, "GET", gw.URL+"/locks/rl/x", "", auth...)
			if last.status == http.StatusTooManyRequests {
				return n, last
			}
			n++
		}
		return n, last
	}
	for name, tc := range map[string]struct {
		auth []string
		n    int // calls allowed at once; 30 means not limited
		q, w int
	}{
		"rule lowers":       {sub("slow-1"), 2, 2, 200},
		"rule raises":       {sub("fast-1"), 30, 0, 0},
		"rule without any":  {sub("other"), 3, 3, 300},
		"ns claim, no rule": {bearer(token(t, jwt.MapClaims{"sub": "own-ns"})), 3, 3, 300},
	} {
		t.Run(name, func(t *testing.T) {
			n, last := allowed(tc.auth)
			if n != tc.n {
				t.Fatalf("calls allowed at once: got %d, want %d (last: %d %s)", n, tc.n, last.status, last.body)
			}
			if tc.n < 30 {
				wantRateLimited(t, last, tc.q, tc.w)
			}
		})
	}
	// Each subject of a rule has a bucket of its own, not one per rule.
	if n, last := allowed(sub("slow-2")); n != 2 {
		t.Fatalf("a second subject of the slow rule: got %d calls allowed, want 2 (last: %d %s)", n, last.status, last.body)
	}
}

// TestSubjectMaxWaiters: a subject with its cap of waiting acquirers on
// this gateway (locks and semaphores together) gets 429 for one more,
// with the RateLimit fields of the waiters policy, and nothing is
// queued; calls that do not wait still go through, and other subjects
// still wait. A policy rule sets its own cap.
func TestSubjectMaxWaiters(t *testing.T) {
	t.Parallel()
	policy := writePolicy(t, `{"rules": [
		{"match": {"sub": "solo"}, "namespaces": ["w"], "subject_max_waiters": 1},
		{"match": {"sub": "*"}, "namespaces": ["w"]}
	]}`)
	gw := startGateway(t, "--policy", policy, "--subject-max-waiters", "2")
	sub := func(name string) []string { return bearer(token(t, jwt.MapClaims{"sub": name, "ns": nil})) }
	alice, bob, solo := sub("alice"), sub("bob"), sub("solo")
	lock, sem := gw.URL+"/locks/w/busy", gw.URL+"/semaphores/w/busy"
	if r := call(t, "POST", lock, `{"ttl_ms":60000}`, bob...); r.status != http.StatusCreated {
		t.Fatalf("bob's acquire: got %d %s", r.status, r.body)
	}
	if r := call(t, "POST", sem, `{"limit":1,"ttl_ms":60000}`, bob...); r.status != http.StatusCreated {
		t.Fatalf("bob's permit: got %d %s", r.status, r.body)
	}

	ctx, cancel := context.WithCancel(t.Context())
	var pending []<-chan response
	wait := func(url, body string, auth []string) {
		got := make(chan response, 1)
		go func() {
			r, err := send(ctx, "POST", url, body, auth...)
			if err != nil {
				r = response{body: []byte(err.Error())}
			}
			got <- r
		}()
		pending = append(pending, got)
	}
	defer func() {
		cancel()
		for _, got := range pending {
			if r := <-got; r.status != 0 {
				t.Errorf("a waiter answered %d %s, want none: it waits until cancelled", r.status, r.body)
			}
		}
	}()
	waiters := func(url string) int {
		var info struct {
			Waiters int `json:"waiters"`
		}
		wantJSON(t, call(t, "GET", url, "", bob...), http.StatusOK, &info)
		return info.Waiters
	}

	wait(lock, `{"wait_ms":60000}`, alice)
	wait(sem, `{"limit":1,"wait_ms":60000}`, alice)
	wait(lock, `{"wait_ms":60000}`, solo)
	pollUntil(t, "3 waiters queue", func() bool { return waiters(lock) == 2 && waiters(sem) == 1 })

	for name, tc := range map[string]struct {
		url, body string
		auth      []string
		q         int
	}{
		"lock, gateway's cap":      {lock, `{"wait_ms":60000}`, alice, 2},
		"semaphore, gateway's cap": {sem, `{"limit":1,"wait_ms":60000}`, alice, 2},
		"lock, rule's cap":         {lock, `{"wait_ms":60000}`, solo, 1},
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, "POST", tc.url, tc.body, tc.auth...)
			p := wantProblem(t, r, http.StatusTooManyRequests, "too_many_requests")
			if !strings.Contains(p.Detail, strconv.Itoa(tc.q)+" acquirers waiting") {
				t.Errorf("detail %q: want it to say the cap, %d", p.Detail, tc.q)
			}
			for h, want := range map[string]string{
				"Retry-After":      "1",
				"RateLimit-Policy": `"waiters";q=` + strconv.Itoa(tc.q) + `;qu="concurrent-requests"`,
				"RateLimit":        `"waiters";r=0`,
			} {
				if got := r.header.Get(h); got != want {
					t.Errorf("%s: got %q, want %q", h, got, want)
				}
			}
		})
	}
	if n, m := waiters(lock), waiters(sem); n != 2 || m != 1 {
		t.Fatalf("waiters after the refusals: got %d and %d, want 2 and 1: a refused call queued", n, m)
	}
	wantProblem(t, call(t, "POST", lock, "", alice...), http.StatusConflict, "lock_held")
	wait(lock, `{"wait_ms":60000}`, bob)
	pollUntil(t, "bob waits too", func() bool { return waiters(lock) == 3 })
}

// TestSubjectLimitsRefused: limits that make no sense stop the gateway at
// start, with an error that names the flag or the rule.
func TestSubjectLimitsRefused(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LOCKGATE_JWT_SECRET": secret}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"negative rate":      {[]string{"--subject-rate", "-1"}, "--subject-rate"},
		"rate not a number":  {[]string{"--subject-rate", "NaN"}, "--subject-rate"},
		"burst without rate": {[]string{"--subject-burst", "10"}, "set --subject-rate too"},
		"negative waiters":   {[]string{"--subject-max-waiters", "-1"}, "--subject-max-waiters"},
		"rule's zero rate": {[]string{"--policy", writePolicy(t, `{"rules":[{"match":{"sub":"*"},"namespaces":["a"],"subject_rate":0}]}`)},
			"rule 1: subject_rate"},
	} {
		t.Run(name, func(t *testing.T) {
			var out, logs gatewaytest.Buffer
			args := append([]string{"gateway", "--addr", "127.0.0.1:0"}, tc.args...)
			err := app.Run(t.Context(), args, func(k string) string { return env[k] }, &out, &logs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}
