package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
	"github.com/lockgate/lockgate/locks/locktest"
)

// TestLockSets: a set is granted whole, with a fencing token per lock and
// one token; a set that cannot be whole holds nothing; one PUT renews and
// one DELETE releases every lock; bad input gets problems, never a token.
func TestLockSets(t *testing.T) {
	_, ts := newTestServer(t, embedded.New(embedded.Options{}))
	alice := signed(t, "alice")

	st, set := call(t, ts.URL, "POST", "/lock-sets", alice, `{"locks":"team/b,team/a,ops/c","ttl_ms":60000,"owner":"batch"}`)
	if st != http.StatusCreated || set["token"] == "" || set["ttl_ms"] != 60000.0 || set["renew_after_ms"] != 20000.0 {
		t.Fatalf("acquire: got %d %v, want 201 with a token", st, set)
	}
	token := set["token"].(string)
	ls := set["locks"].([]any)
	for i, want := range []string{"team/b", "team/a", "ops/c"} {
		l := ls[i].(map[string]any)
		if l["lock"] != want || l["fencing_token"].(float64) <= 0 {
			t.Fatalf("lock %d: got %v, want %s with a fencing token", i, l, want)
		}
		st, info := call(t, ts.URL, "GET", "/locks/"+want, alice, "")
		if st != http.StatusOK || info["fencing_token"] != l["fencing_token"] || info["owner"] != "batch" {
			t.Fatalf("%s: got %d %v, want held by the set", want, st, info)
		}
	}

	// All or nothing: team/a is the set's, so {team/a, team/d} gets none.
	st, p := call(t, ts.URL, "POST", "/lock-sets", alice, `{"locks":"team/d,team/a"}`)
	if st != http.StatusConflict || p["code"] != "lock_held" || p["retry_after_ms"] == nil {
		t.Fatalf("a set with a held lock: got %d %v, want 409 lock_held", st, p)
	}
	if st, _ := call(t, ts.URL, "GET", "/locks/team/d", alice, ""); st != http.StatusNotFound {
		t.Fatalf("team/d after the refused set: got %d, want 404 (free)", st)
	}

	query := "?locks=team/b,team/a,ops/c"
	st, r := call(t, ts.URL, "PUT", "/lock-sets/lease"+query, alice, `{"ttl_ms":120000}`, "Lock-Token", token)
	if st != http.StatusOK || r["ttl_ms"].(float64) < 110000 || len(r["locks"].([]any)) != 3 {
		t.Fatalf("renew: got %d %v, want 200 with 3 leases of 120 s", st, r)
	}
	st, r = call(t, ts.URL, "PUT", "/lock-sets/lease"+query, alice, "", "Lock-Token", token)
	if st != http.StatusOK || r["ttl_ms"].(float64) > 60000 {
		t.Fatalf("renew without a ttl: got %d %v, want the set's 60 s", st, r)
	}
	if st, p := call(t, ts.URL, "DELETE", "/lock-sets"+query, alice, "", "Lock-Token", "x"+token); st != http.StatusConflict || p["code"] != "not_holder" {
		t.Fatalf("release with another token: got %d %v, want 409 not_holder", st, p)
	}
	st, rel := call(t, ts.URL, "DELETE", "/lock-sets"+query, alice, "", "Lock-Token", token)
	if st != http.StatusOK || len(rel["released"].([]any)) != 3 || len(rel["gone"].([]any)) != 0 {
		t.Fatalf("release: got %d %v, want 3 released", st, rel)
	}
	for _, l := range []string{"team/a", "team/b", "ops/c"} {
		if st, _ := call(t, ts.URL, "GET", "/locks/"+l, alice, ""); st != http.StatusNotFound {
			t.Fatalf("%s after the release: got %d, want 404", l, st)
		}
	}

	many := make([]string, locks.MaxSetLocks+1)
	for i := range many {
		many[i] = fmt.Sprintf("team/l%d", i)
	}
	teamOnly := nsToken(t, "carol", "team")
	for name, c := range map[string]struct {
		method, path, bearer, body string
		status                     int
		code                       string
	}{
		"17 locks":           {"POST", "/lock-sets", alice, `{"locks":"` + strings.Join(many, ",") + `"}`, 400, "invalid_request"},
		"16 locks":           {"POST", "/lock-sets", alice, `{"locks":"` + strings.Join(many[:16], ",") + `"}`, 201, ""},
		"a duplicate":        {"POST", "/lock-sets", alice, `{"locks":"team/x,team/x"}`, 400, "invalid_request"},
		"no locks":           {"POST", "/lock-sets", alice, `{"locks":""}`, 400, "invalid_request"},
		"no body":            {"POST", "/lock-sets", alice, ``, 400, "invalid_request"},
		"a name with no ns":  {"POST", "/lock-sets", alice, `{"locks":"xyz"}`, 400, "invalid_request"},
		"another namespace":  {"POST", "/lock-sets", teamOnly, `{"locks":"team/y,ops/y"}`, 403, "forbidden"},
		"release another ns": {"DELETE", "/lock-sets?locks=ops/y", teamOnly, "", 403, "forbidden"},
		"17 to release":      {"DELETE", "/lock-sets?locks=" + strings.Join(many, ","), alice, "", 400, "invalid_request"},
		"a wait too long":    {"POST", "/lock-sets", alice, `{"locks":"team/z","wait_ms":999999999}`, 400, "invalid_request"},
	} {
		t.Run(name, func(t *testing.T) {
			var headers []string
			if c.method != "POST" {
				headers = []string{"Lock-Token", token}
			}
			st, p := call(t, ts.URL, c.method, c.path, c.bearer, c.body, headers...)
			if st != c.status || (c.code != "" && p["code"] != c.code) {
				t.Fatalf("got %d %v, want %d %s", st, p, c.status, c.code)
			}
			if c.code == "forbidden" && !strings.Contains(p["detail"].(string), `"ops"`) {
				t.Fatalf("got detail %q, want it to name namespace ops", p["detail"])
			}
			if strings.Contains(fmt.Sprint(p), token) {
				t.Fatalf("the answer %v shows the set's token", p)
			}
		})
	}
}

// TestLockSetWaits: two sets naming the same locks in opposite orders,
// both waiting, are served one after the other.
func TestLockSetWaits(t *testing.T) {
	_, ts := newTestServer(t, embedded.New(embedded.Options{}))
	alice := signed(t, "alice")
	st, first := call(t, ts.URL, "POST", "/lock-sets", alice, `{"locks":"team/a,team/b","ttl_ms":60000}`)
	if st != http.StatusCreated {
		t.Fatalf("first: got %d %v", st, first)
	}
	done := make(chan map[string]any, 1)
	go func() {
		st, second := call(t, ts.URL, "POST", "/lock-sets", alice, `{"locks":"team/b,team/a","ttl_ms":60000,"wait_ms":20000}`)
		if st != http.StatusCreated {
			second = map[string]any{"status": st, "body": second}
		}
		done <- second
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, info := call(t, ts.URL, "GET", "/locks/team/a", alice, "")
		if info["waiters"] == 1.0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second set never queued on team/a: %v", info)
		}
		time.Sleep(5 * time.Millisecond) // polling for the waiter to queue
	}
	if st, _ := call(t, ts.URL, "DELETE", "/lock-sets?locks=team/a,team/b", alice, "", "Lock-Token", first["token"].(string)); st != http.StatusOK {
		t.Fatalf("release the first: got %d", st)
	}
	second := <-done
	if second["token"] == nil {
		t.Fatalf("the second set: got %v, want 201", second)
	}
	ls := second["locks"].([]any)
	if ls[0].(map[string]any)["lock"] != "team/b" || ls[1].(map[string]any)["lock"] != "team/a" {
		t.Fatalf("got locks %v, want them in the order asked", ls)
	}
}

// TestLockSetLosesALockWhileWaiting: a set whose lock, taken while it
// waited for the next, is broken and taken by another caller is refused
// as a set is, 409 lock_held, with a Retry-After for that caller's lease,
// and holds nothing.
func TestLockSetLosesALockWhileWaiting(t *testing.T) {
	_, ts := newTestServer(t, embedded.New(embedded.Options{History: 10}))
	alice, bob, admin := signed(t, "alice"), signed(t, "bob"), signed(t, "root", "team")
	st, b := call(t, ts.URL, "POST", "/locks/team/b", alice, `{"ttl_ms":60000}`)
	if st != http.StatusCreated {
		t.Fatalf("acquire team/b: got %d %v", st, b)
	}
	type answer struct {
		status     int
		retryAfter string
		p          Problem
	}
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", ts.URL+"/lock-sets", strings.NewReader(`{"locks":"team/a,team/b","ttl_ms":60000,"wait_ms":20000}`))
		req.Header.Set("Authorization", "Bearer "+alice)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			done <- answer{}
			return
		}
		defer resp.Body.Close()
		a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
		json.NewDecoder(resp.Body).Decode(&a.p)
		done <- a
	}()
	waitFor(t, func() bool {
		_, info := call(t, ts.URL, "GET", "/locks/team/b", alice, "")
		return info["waiters"] == 1.0 // the set holds team/a, and waits
	})
	if st, p := call(t, ts.URL, "POST", "/locks/team/a/break", admin, ""); st != http.StatusOK {
		t.Fatalf("break team/a: got %d %v", st, p)
	}
	if st, p := call(t, ts.URL, "POST", "/locks/team/a", bob, `{"ttl_ms":30000}`); st != http.StatusCreated {
		t.Fatalf("bob's acquire of team/a: got %d %v", st, p)
	}
	if st, p := call(t, ts.URL, "DELETE", "/locks/team/b", alice, "", "Lock-Token", b["token"].(string)); st != http.StatusNoContent {
		t.Fatalf("release team/b: got %d %v", st, p)
	}
	a := <-done
	if ra, err := strconv.Atoi(a.retryAfter); a.status != http.StatusConflict || a.p.Code != ProblemCodeLockHeld || err != nil || ra < 1 || ra > 30 {
		t.Fatalf("the set: got %d %q, Retry-After %q; want 409 lock_held, Retry-After within bob's 30 s", a.status, a.p.Code, a.retryAfter)
	}
	if st, _ := call(t, ts.URL, "GET", "/locks/team/b", alice, ""); st != http.StatusNotFound {
		t.Fatalf("team/b after the refused set: got %d, want 404 (free)", st)
	}
}

// nsToken is a token of subject sub granted only the namespaces ns.
func nsToken(t *testing.T, sub string, ns ...string) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": sub, "ns": ns, "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestLockSetPriority: a set's priority is a lock's (#39): a set that
// waits at priority 9 ranks before a priority-0 waiter that queued first,
// and gets the lock when it frees; out of 0 to 9 it is a 400
// invalid_priority, with nothing taken.
func TestLockSetPriority(t *testing.T) {
	mem := embedded.New(embedded.Options{})
	_, ts := newTestServer(t, mem)
	alice := signed(t, "alice")
	for _, p := range []string{"10", "-1"} {
		st, pr := call(t, ts.URL, "POST", "/lock-sets", alice, `{"locks":"team/p,team/q","wait_ms":1000,"priority":`+p+`}`)
		if st != http.StatusBadRequest || pr["code"] != "invalid_priority" {
			t.Fatalf("priority %s: got %d %v, want 400 invalid_priority", p, st, pr)
		}
	}
	for _, l := range []string{"team/p", "team/q"} {
		if st, _ := call(t, ts.URL, "GET", "/locks/"+l, alice, ""); st != http.StatusNotFound {
			t.Fatalf("%s after the refused sets: got %d, want 404 (free)", l, st)
		}
	}

	held := locks.Key{Namespace: "team", Name: "p"}
	holder, err := mem.Acquire(context.Background(), held, locks.AcquireRequest{TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	zero := locktest.AcquireAsync(t.Context(), mem, held, locks.AcquireRequest{TTL: time.Minute, Wait: time.Minute, Owner: "zero"})
	locktest.WaitUntilQueued(t, mem, held, 1)
	done := make(chan map[string]any, 1)
	go func() {
		st, set := call(t, ts.URL, "POST", "/lock-sets", alice, `{"locks":"team/q,team/p","ttl_ms":60000,"wait_ms":20000,"owner":"set","priority":9}`)
		if st != http.StatusCreated {
			set = map[string]any{"status": st, "body": set}
		}
		done <- set
	}()
	locktest.WaitUntilQueued(t, mem, held, 2)
	var info struct {
		QueuePriorities []int `json:"queue_priorities"`
	}
	getJSON(t, ts.URL+"/locks/team/p", &info)
	if !slices.Equal(info.QueuePriorities, []int{9, 0}) {
		t.Fatalf("got queue_priorities %v, want [9 0]: the set's waiter first", info.QueuePriorities)
	}
	if _, err := mem.Release(context.Background(), held, holder.Token); err != nil {
		t.Fatal(err)
	}
	set := <-done
	if set["token"] == nil {
		t.Fatalf("the set at priority 9: got %v, want 201 before the waiter ahead of it", set)
	}
	if st, l := call(t, ts.URL, "GET", "/locks/team/p", alice, ""); st != http.StatusOK || l["owner"] != "set" || l["waiters"] != 1.0 {
		t.Fatalf("team/p after the set's grant: got %d %v, want the set holding it, the priority-0 waiter waiting", st, l)
	}
	if st, _ := call(t, ts.URL, "DELETE", "/lock-sets?locks=team/q,team/p", alice, "", "Lock-Token", set["token"].(string)); st != http.StatusOK {
		t.Fatalf("release the set: got %d", st)
	}
	if res := <-zero; res.Err != nil {
		t.Fatalf("the priority-0 waiter after the set: %v", res.Err)
	}
}
