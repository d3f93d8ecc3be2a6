package e2e

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/lockgate/lockgate/internal/redistest"
)

// signedGrant is the signed_grant of an answer, "" when it has none.
func signedGrant(t *testing.T, r response, status int) string {
	t.Helper()
	var b struct {
		SignedGrant *string `json:"signed_grant"`
	}
	wantJSON(t, r, status, &b)
	if b.SignedGrant == nil {
		return ""
	}
	if *b.SignedGrant == "" {
		t.Fatalf("signed_grant is empty: %s", r.body)
	}
	return *b.SignedGrant
}

// grantsSigned reads lockgate_grants_signed_total from a gateway's metrics.
func grantsSigned(t *testing.T, url string) int {
	t.Helper()
	r := call(t, "GET", url+"/metrics", "")
	m := regexp.MustCompile(`(?m)^lockgate_grants_signed_total (\d+)`).FindSubmatch(r.body)
	if m == nil {
		t.Fatalf("no lockgate_grants_signed_total in the metrics")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestGrantsSignedOnRequest: through the gateway, on Redis, a grant is
// signed when its call asks ("signed": true in a body, ?signed=true on a
// ticket's poll) and not otherwise; --sign-grants always signs every call
// that does not say false. The metric counts the signatures made, and no
// other: an unasked call costs none.
func TestGrantsSignedOnRequest(t *testing.T) {
	t.Parallel()
	u := redistest.Start(t).URL()
	auth := bearer(token(t, nil))
	for _, tc := range []struct {
		name string
		args []string
		// unasked says whether a call that leaves signed out is signed.
		unasked bool
	}{
		{"on-request", nil, false},
		{"always", []string{"--sign-grants", "always"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gw := startGateway(t, append([]string{"--redis-url", u, "--redis-prefix", "signed-" + tc.name}, tc.args...)...)
			want := 0 // signatures the gateway should have made so far
			check := func(what string, r response, status int, signed bool) string {
				t.Helper()
				jws := signedGrant(t, r, status)
				if (jws != "") != signed {
					t.Fatalf("%s: signed_grant %q, want one: %v", what, jws, signed)
				}
				if signed {
					want++
				}
				if got := grantsSigned(t, gw.URL); got != want {
					t.Fatalf("%s: lockgate_grants_signed_total %d, want %d", what, got, want)
				}
				return jws
			}
			lock := gw.URL + "/locks/sig/job"
			r := call(t, "POST", lock, `{"ttl_ms":60000}`, auth...)
			check("acquire", r, http.StatusCreated, tc.unasked)
			var g grant
			_ = json.Unmarshal(r.body, &g)
			check("renew, signed: true", call(t, "PUT", lock+"/lease", `{"signed":true}`, with(auth, []string{"Lock-Token", g.Token})...), http.StatusOK, true)
			check("renew, signed: false", call(t, "PUT", lock+"/lease", `{"signed":false}`, with(auth, []string{"Lock-Token", g.Token})...), http.StatusOK, false)
			check("renew", call(t, "PUT", lock+"/lease", "", with(auth, []string{"Lock-Token", g.Token})...), http.StatusOK, tc.unasked)

			// A ticket: its acquire and its poll each ask for their own answer.
			tk := openTicket(t, lock, `{"ttl_ms":60000,"wait_ms":30000,"signed":true}`, auth)
			wantProblem(t, call(t, "GET", gw.URL+tk.location+"?signed=yes", "", with(auth, []string{"Ticket-Token", tk.TicketToken})...),
				http.StatusBadRequest, "invalid_request")
			if r := call(t, "DELETE", lock, "", with(auth, []string{"Lock-Token", g.Token})...); r.status != http.StatusNoContent {
				t.Fatalf("release: %d %s", r.status, r.body)
			}
			poll := func(query string) response {
				return call(t, "GET", gw.URL+tk.location+query, "", with(auth, []string{"Ticket-Token", tk.TicketToken})...)
			}
			check("poll, signed=true", poll("?signed=true"), http.StatusCreated, true)
			check("poll again", poll(""), http.StatusCreated, tc.unasked)
			check("poll, signed=false", poll("?signed=false"), http.StatusCreated, false)
			if r := call(t, "DELETE", lock, "", with(auth, []string{"Lock-Token", tk.TicketToken})...); r.status != http.StatusNoContent {
				t.Fatalf("release the ticket's grant: %d %s", r.status, r.body)
			}
		})
	}
}
