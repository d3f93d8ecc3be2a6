package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestLockValue: a grant's value, from the acquire's body or a PUT of its
// holder, is what GET and the history show; a waiter's comes with the
// hand-off; bad values and strangers' tokens are refused with a problem
// and change nothing; and no value ever reaches the logs or an error body.
func TestLockValue(t *testing.T) {
	t.Parallel()
	type info struct {
		FencingToken int64   `json:"fencing_token"`
		Value        *string `json:"value"`
		Holders      []struct {
			Value *string `json:"value"`
		} `json:"holders"`
	}
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, append(b.args(t), "--history", "10")...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/vals/leader"
		// Each value is one a leak would show: none may reach the logs.
		first, second, third := "secret-first-10.0.0.1:8080", "secret-second-10.0.0.2:8080", "secret-third-10.0.0.3:8080"
		valueIs := func(want string) info {
			t.Helper()
			var i info
			wantJSON(t, call(t, "GET", url, "", auth...), http.StatusOK, &i)
			got := ""
			if i.Value != nil {
				got = *i.Value
			}
			if got != want || len(i.Holders) != 1 || (i.Holders[0].Value == nil) != (want == "") {
				t.Fatalf("GET: value %q, holders %+v; want %q", got, i.Holders, want)
			}
			return i
		}

		g := acquire(t, url, `{"ttl_ms":60000,"value":"`+first+`"}`)
		valueIs(first)
		var set struct {
			Lock         string `json:"lock"`
			FencingToken int64  `json:"fencing_token"`
		}
		holder := with(auth, []string{"Lock-Token", g.Token})
		wantJSON(t, call(t, "PUT", url+"/value", `{"value":"`+second+`"}`, holder...), http.StatusOK, &set)
		if set.FencingToken != g.FencingToken || set.Lock != "vals/leader" {
			t.Fatalf("PUT value: got %+v, want fencing token %d", set, g.FencingToken)
		}
		valueIs(second)

		var bodies []string
		for name, tc := range map[string]struct {
			method, path, body string
			headers            []string
			status             int
			code               string
		}{
			"stranger":       {"PUT", "/value", `{"value":"` + third + `"}`, with(auth, []string{"Lock-Token", "not-a-token"}), 409, "not_holder"},
			"too long":       {"PUT", "/value", `{"value":"` + third + strings.Repeat("x", 1024) + `"}`, holder, 400, "invalid_request"},
			"too many bytes": {"PUT", "/value", `{"value":"` + third + strings.Repeat("é", 1000) + `"}`, holder, 400, "invalid_request"},
			"not a string":   {"PUT", "/value", `{"value":12345}`, holder, 400, "invalid_request"},
			"no value":       {"PUT", "/value", `{}`, holder, 400, "invalid_request"},
			"no body":        {"PUT", "/value", ``, holder, 400, "invalid_request"},
			"unknown field":  {"PUT", "/value", `{"value":"` + third + `","ttl_ms":5}`, holder, 400, "invalid_request"},
			"over 16 KiB":    {"PUT", "/value", `{"value":"` + third + strings.Repeat("x", 17<<10) + `"}`, holder, 413, "payload_too_large"},
			"shared acquire": {"POST", "", `{"mode":"shared","value":"` + third + `"}`, auth, 400, "invalid_request"},
			"long acquire":   {"POST", "", `{"value":"` + third + strings.Repeat("x", 1024) + `"}`, auth, 400, "invalid_request"},
		} {
			r := call(t, tc.method, url+tc.path, tc.body, tc.headers...)
			t.Logf("%s: %d", name, r.status)
			wantProblem(t, r, tc.status, tc.code)
			bodies = append(bodies, string(r.body))
		}
		valueIs(second)

		waiter := callAsync(t, "POST", url, `{"ttl_ms":60000,"wait_ms":30000,"value":"`+third+`"}`, auth...)
		waitForQueued(t, url, 1)
		call(t, "DELETE", url, "", holder...)
		var w grant
		wantJSON(t, <-waiter, http.StatusCreated, &w)
		if got := valueIs(third); got.FencingToken != w.FencingToken {
			t.Fatalf("GET after the hand-off: fencing token %d, want the waiter's %d", got.FencingToken, w.FencingToken)
		}
		if r := call(t, "PUT", url+"/value", `{"value":"x"}`, holder...); r.status != http.StatusConflict {
			t.Fatalf("PUT value with a released token: got %d, want 409", r.status)
		}
		wantJSON(t, call(t, "PUT", url+"/value", `{"value":""}`, with(auth, []string{"Lock-Token", w.Token})...), http.StatusOK, &set)
		valueIs("")

		var h struct {
			Events []struct {
				Event        string  `json:"event"`
				FencingToken int64   `json:"fencing_token"`
				Value        *string `json:"value"`
			} `json:"events"`
		}
		wantJSON(t, call(t, "GET", url+"/history", "", auth...), http.StatusOK, &h)
		var got []string
		for _, e := range h.Events {
			s := e.Event
			if e.Value != nil {
				s += "=" + *e.Value
			}
			got = append(got, s)
		}
		want := []string{"value_changed", "handed_over=" + third, "released", "value_changed=" + second, "acquired=" + first}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("history: got %v, want %v", got, want)
		}

		logs := gw.logs.String()
		for _, v := range []string{first, second, third} {
			if strings.Contains(logs, v) {
				t.Errorf("the logs show a value (%s):\n%s", v, logs)
			}
			for _, body := range bodies {
				if strings.Contains(body, v) {
					t.Errorf("an error body shows a value: %s", body)
				}
			}
		}
	})
}
