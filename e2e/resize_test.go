package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/redistest"
)

// semaphoreSize is the 200 body of a resize.
type semaphoreSize struct {
	Semaphore string `json:"semaphore"`
	Limit     int    `json:"limit"`
	Held      int    `json:"held"`
	Waiters   int    `json:"waiters"`
}

// TestResizeSemaphore: on a real Redis, through a real listener, a raised
// limit hands permits to the waiters at once; a lowered one grants nothing
// until fewer than the new limit hold; only an administrator may resize,
// only to 1..10000, and only a semaphore in use.
func TestResizeSemaphore(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--redis-url", redistest.Start(t).URL())
	url := gw.URL + "/semaphores/e2e/pool"
	auth := bearer(token(t, nil))
	admin := with(bearer(token(t, jwt.MapClaims{"sub": "ops", "ns_admin": []string{"e2e"}})), []string{"Content-Type", "application/json"})
	resize := func(limit string, headers ...string) response {
		return call(t, "PUT", url+"/limit", `{"limit":`+limit+`}`, headers...)
	}

	wantProblem(t, resize("2", admin...), http.StatusNotFound, "not_held")

	held := takePermit(t, url, `{"limit":1,"ttl_ms":60000}`)
	waiting := []<-chan response{}
	for i := range 2 {
		waiting = append(waiting, callAsync(t, "POST", url, `{"limit":1,"ttl_ms":60000,"wait_ms":30000}`, auth...))
		waitForQueued(t, url, i+1)
	}

	wantProblem(t, resize("3", with(auth, []string{"Content-Type", "application/json"})...), http.StatusForbidden, "forbidden")
	wantProblem(t, resize("0", admin...), http.StatusBadRequest, "invalid_request")
	wantProblem(t, resize("10001", admin...), http.StatusBadRequest, "invalid_request")

	var size semaphoreSize
	wantJSON(t, resize("3", admin...), http.StatusOK, &size)
	if size != (semaphoreSize{Semaphore: "e2e/pool", Limit: 3, Held: 3, Waiters: 0}) {
		t.Fatalf("raise to 3: got %+v, want 3 held and none waiting", size)
	}
	var permits []permit
	for i, w := range waiting {
		select {
		case r := <-w:
			var p permit
			wantJSON(t, r, http.StatusCreated, &p)
			// A permit's limit is the one its request sent.
			if p.Limit != 1 || p.FencingToken <= held.FencingToken {
				t.Fatalf("waiter %d: got %+v, want limit 1 and a fencing token above %d", i, p, held.FencingToken)
			}
			permits = append(permits, p)
		case <-time.After(10 * time.Second):
			t.Fatalf("waiter %d got no permit within 10s of the raise", i)
		}
	}

	wantJSON(t, resize("1", admin...), http.StatusOK, &size)
	if size.Limit != 1 || size.Held != 3 {
		t.Fatalf("lower to 1: got %+v, want limit 1 with the 3 permits still held", size)
	}
	wantProblem(t, call(t, "POST", url, `{"limit":3,"ttl_ms":60000}`, auth...), http.StatusConflict, "limit_mismatch")
	late := callAsync(t, "POST", url, `{"limit":1,"ttl_ms":60000,"wait_ms":30000}`, auth...)
	waitForQueued(t, url, 1)
	giveBack(t, url, held)
	giveBack(t, url, permits[0])
	// A release answers after its hand-off: 1 still holds, of a limit of 1,
	// so the late waiter still waits.
	var info semaphoreInfo
	wantJSON(t, call(t, "GET", url, "", auth...), http.StatusOK, &info)
	if len(info.Holders) != 1 || info.Waiters == nil || *info.Waiters != 1 {
		t.Fatalf("after two releases under limit 1: got %d holders and waiters %v, want 1 and 1", len(info.Holders), info.Waiters)
	}
	giveBack(t, url, permits[1])
	select {
	case r := <-late:
		var p permit
		wantJSON(t, r, http.StatusCreated, &p)
		if p.Limit != 1 {
			t.Fatalf("late waiter: got limit %d, want 1", p.Limit)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late waiter got no permit within 10s of the last release")
	}
}
