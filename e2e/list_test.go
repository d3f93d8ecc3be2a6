package e2e

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/lockgate/lockgate/internal/redistest"
)

// listed is one item of GET /locks/{ns}.
type listed struct {
	Name         string    `json:"name"`
	Lock         string    `json:"lock"`
	Held         bool      `json:"held"`
	FencingToken int64     `json:"fencing_token"`
	TTLMs        int64     `json:"ttl_ms"`
	ExpiresAt    time.Time `json:"expires_at"`
	AcquiredAt   time.Time `json:"acquired_at"`
	Subject      string    `json:"subject"`
	Owner        string    `json:"owner"`
	Holds        int       `json:"holds"`
	Waiters      int       `json:"waiters"`
}

// listAll follows GET /locks/{ns} page by page, limit locks a page, and
// returns the locks by name and the raw bodies of the pages.
func listAll(t *testing.T, gw *gateway, ns string, limit int, auth []string) (map[string]listed, []string) {
	t.Helper()
	all := make(map[string]listed)
	var bodies []string
	cursor := ""
	for range 1000 {
		u := fmt.Sprintf("%s/locks/%s?limit=%d", gw.URL, ns, limit)
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		var page struct {
			Locks      []listed `json:"locks"`
			NextCursor *string  `json:"next_cursor"`
		}
		r := call(t, "GET", u, "", auth...)
		wantJSON(t, r, http.StatusOK, &page)
		bodies = append(bodies, string(r.body))
		if len(page.Locks) > limit {
			t.Fatalf("got a page of %d locks, want at most %d", len(page.Locks), limit)
		}
		for _, l := range page.Locks {
			all[l.Name] = l
		}
		if page.NextCursor == nil {
			return all, bodies
		}
		cursor = *page.NextCursor
	}
	t.Fatal("the listing did not end within 1000 pages")
	return nil, nil
}

// TestListLocks: GET /locks/{ns} lists the namespace's held locks across
// pages (on each backend, and on a three-master Redis Cluster), as GET of
// each lock describes it, never with a token; it needs a token that grants
// the namespace, and refuses a bad cursor or limit with a 400.
func TestListLocks(t *testing.T) {
	t.Parallel()
	cases := append(backends, backend{name: "cluster", args: func(t *testing.T) []string {
		return []string{"--redis-cluster", "--redis-url", "redis://" + redistest.StartCluster(t, 3).Nodes[0].Addr}
	}})
	for _, b := range cases {
		t.Run(b.name, func(t *testing.T) {
			gw := startGateway(t, b.args(t)...)
			auth := bearer(token(t, nil))
			const n = 12
			tokens := make([]string, 0, n)
			for i := range n {
				g := acquire(t, fmt.Sprintf("%s/locks/inventory/item-%02d", gw.URL, i), `{"ttl_ms":60000,"owner":"worker"}`)
				tokens = append(tokens, g.Token)
			}
			acquire(t, gw.URL+"/locks/inventory2/item-00", "")
			got, bodies := listAll(t, gw, "inventory", 5, auth)
			if len(got) != n || len(bodies) < 3 {
				t.Fatalf("got %d locks in %d pages, want %d in at least 3", len(got), len(bodies), n)
			}
			for name, l := range got {
				var one listed
				wantJSON(t, call(t, "GET", gw.URL+"/locks/inventory/"+name, "", auth...), http.StatusOK, &one)
				if l.Lock != "inventory/"+name || !l.Held || l.Subject != "tester" || l.Owner != "worker" ||
					l.FencingToken != one.FencingToken || !l.AcquiredAt.Equal(one.AcquiredAt) || l.Holds != 1 ||
					l.TTLMs <= 0 || l.TTLMs > 60000 {
					t.Errorf("got %+v, want what GET of the lock says: %+v", l, one)
				}
			}
			for _, body := range bodies {
				for _, tok := range tokens {
					if strings.Contains(body, tok) {
						t.Fatalf("a page carries an owner token: %s", body)
					}
				}
			}

			wantProblem(t, call(t, "GET", gw.URL+"/locks/inventory?cursor=bm9wZQ", "", auth...), http.StatusBadRequest, "invalid_request")
			wantProblem(t, call(t, "GET", gw.URL+"/locks/inventory?limit=0", "", auth...), http.StatusBadRequest, "invalid_request")
			wantProblem(t, call(t, "GET", gw.URL+"/locks/inventory?limit=1001", "", auth...), http.StatusBadRequest, "invalid_request")
			wantProblem(t, call(t, "GET", gw.URL+"/locks/inventory?limit=ten", "", auth...), http.StatusBadRequest, "invalid_request")
			wantProblem(t, call(t, "GET", gw.URL+"/locks/Inventory", "", auth...), http.StatusBadRequest, "invalid_request")
			wantProblem(t, call(t, "GET", gw.URL+"/locks/inventory", ""), http.StatusUnauthorized, "unauthorized")
			other := bearer(token(t, jwt.MapClaims{"ns": []string{"inventory2"}}))
			wantProblem(t, call(t, "GET", gw.URL+"/locks/inventory", "", other...), http.StatusForbidden, "forbidden")
		})
	}
}

// TestListChargedByItsCost: a page of GET /locks/{ns} takes from the
// caller's rate bucket one request, and one more per lock it looked at,
// as a GET of each would: a listing costs Redis far more than one request.
func TestListChargedByItsCost(t *testing.T) {
	t.Parallel()
	for _, b := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"memory", func(*testing.T) []string { return nil }},
		{"redis", func(t *testing.T) []string { return []string{"--redis-url", redistest.Start(t).URL()} }},
	} {
		t.Run(b.name, func(t *testing.T) {
			// 0.01/s: no token comes back during the test.
			gw := startGateway(t, append(b.args(t), "--subject-rate", "0.01", "--subject-burst", "10")...)
			alice := bearer(token(t, jwt.MapClaims{"sub": "alice"}))
			for i := range 4 { // 4 requests: 6 left
				if r := call(t, "POST", gw.URL+fmt.Sprintf("/locks/cost/job-%d", i), `{"ttl_ms":60000}`, alice...); r.status != http.StatusCreated {
					t.Fatalf("acquire %d: got %d %s, want 201", i, r.status, r.body)
				}
			}
			var page struct {
				Locks []listed `json:"locks"`
			}
			wantJSON(t, call(t, "GET", gw.URL+"/locks/cost", "", alice...), http.StatusOK, &page) // 1 + 4: 1 left
			if len(page.Locks) != 4 {
				t.Fatalf("got %d locks listed, want 4", len(page.Locks))
			}
			wantJSON(t, call(t, "GET", gw.URL+"/locks/cost/job-0", "", alice...), http.StatusOK, &listed{}) // the last one
			wantRateLimited(t, call(t, "GET", gw.URL+"/locks/cost/job-1", "", alice...), 10, 1000)
		})
	}
}
