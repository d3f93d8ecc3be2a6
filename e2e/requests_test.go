package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestCurlStyleBodies: curl -d sends JSON labelled as a form, and users do
// not add a Content-Type; an empty or absent body means the defaults.
func TestCurlStyleBodies(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	for name, tc := range map[string]struct {
		body, contentType string
		wantTTL           int64
	}{
		"form content type": {body: `{"ttl_ms":5000}`, contentType: "application/x-www-form-urlencoded", wantTTL: 5000},
		"no content type":   {body: `{"ttl_ms":6000}`, wantTTL: 6000},
		"text/plain":        {body: `{"ttl_ms":7000}`, contentType: "text/plain", wantTTL: 7000},
		"json with charset": {body: `{"ttl_ms":8000}`, contentType: "application/json; charset=utf-8", wantTTL: 8000},
		"no body":           {wantTTL: 30000},
		"empty object":      {body: `{}`, wantTTL: 30000},
		"whitespace only":   {body: " \n\t", contentType: "application/x-www-form-urlencoded", wantTTL: 30000},
		"empty form body":   {contentType: "application/x-www-form-urlencoded", wantTTL: 30000},
	} {
		t.Run(name, func(t *testing.T) {
			headers := bearer(token(t, nil))
			if tc.contentType != "" {
				headers = append(headers, "Content-Type", tc.contentType)
			}
			var g grant
			wantJSON(t, call(t, "POST", gw.URL+"/locks/curl/"+strings.NewReplacer(" ", "-", "/", "-").Replace(name), tc.body, headers...), http.StatusCreated, &g)
			if g.TTLMs != tc.wantTTL {
				t.Fatalf("ttl_ms: got %d, want %d", g.TTLMs, tc.wantTTL)
			}
		})
	}
}

// TestInvalidRequests: bad input is a 400 invalid_request in our own words,
// never a 500 and never a library's message.
func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, "--max-ttl", "1m", "--max-wait", "10s")
	auth := bearer(token(t, nil))
	lockToken := []string{"Lock-Token", "whatever"}
	for name, tc := range map[string]struct {
		method, path, body string
		headers            []string
		wantDetail         string
	}{
		"unknown field":        {"POST", "/locks/a/b", `{"ttl_ms":1000,"ttl":5}`, auth, `unknown field "ttl"`},
		"fractional ttl":       {"POST", "/locks/a/b", `{"ttl_ms":1.5}`, auth, "integer"},
		"string ttl":           {"POST", "/locks/a/b", `{"ttl_ms":"1000"}`, auth, "integer"},
		"zero ttl":             {"POST", "/locks/a/b", `{"ttl_ms":0}`, auth, "at least 1"},
		"negative ttl":         {"POST", "/locks/a/b", `{"ttl_ms":-5}`, auth, "at least 1"},
		"ttl over max":         {"POST", "/locks/a/b", `{"ttl_ms":60001}`, auth, "between 1 and 60000"},
		"huge ttl":             {"POST", "/locks/a/b", `{"ttl_ms":99999999999999999999}`, auth, ""},
		"negative wait":        {"POST", "/locks/a/b", `{"wait_ms":-1}`, auth, "at least 0"},
		"wait over max":        {"POST", "/locks/a/b", `{"wait_ms":10001}`, auth, "between 0 and 10000"},
		"exponent":             {"POST", "/locks/a/b", `{"ttl_ms":2e3}`, auth, "plain integers"},
		"null ttl":             {"POST", "/locks/a/b", `{"ttl_ms":null}`, auth, ""},
		"owner too long":       {"POST", "/locks/a/b", `{"owner":"` + strings.Repeat("x", 129) + `"}`, auth, "at most 128"},
		"owner not a string":   {"POST", "/locks/a/b", `{"owner":7}`, auth, ""},
		"not json":             {"POST", "/locks/a/b", `ttl_ms=5000`, auth, "JSON object"},
		"array body":           {"POST", "/locks/a/b", `[1]`, auth, "JSON object"},
		"truncated json":       {"POST", "/locks/a/b", `{"ttl_ms":`, auth, "JSON object"},
		"upper-case namespace": {"POST", "/locks/Billing/b", "", auth, "namespace"},
		"namespace too long":   {"POST", "/locks/" + strings.Repeat("a", 64) + "/b", "", auth, "namespace"},
		"name with a space":    {"GET", "/locks/a/b%20c", "", auth, "name"},
		"name with a slash":    {"GET", "/locks/a/b%2Fc", "", auth, "name"},
		"name starts with dot": {"GET", "/locks/a/.b", "", auth, "name"},
		"release no token":     {"DELETE", "/locks/a/b", "", auth, "Lock-Token"},
		"renew no token":       {"PUT", "/locks/a/b/lease", "", auth, "Lock-Token"},
		"renew empty token":    {"PUT", "/locks/a/b/lease", "", with(auth, []string{"Lock-Token", ""}), "Lock-Token"},
		"renew unknown field":  {"PUT", "/locks/a/b/lease", `{"wait_ms":5}`, with(auth, lockToken), "unknown field"},
		"renew ttl over max":   {"PUT", "/locks/a/b/lease", `{"ttl_ms":60001}`, with(auth, lockToken), "between 1 and 60000"},
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, tc.method, gw.URL+tc.path, tc.body, tc.headers...)
			p := wantProblem(t, r, http.StatusBadRequest, "invalid_request")
			if !strings.Contains(p.Detail, tc.wantDetail) {
				t.Fatalf("detail: got %q, want it to mention %q", p.Detail, tc.wantDetail)
			}
			for _, leak := range []string{"json:", "kin-openapi", "openapi3", "Error at", "doesn't match schema", "goroutine"} {
				if strings.Contains(string(r.body), leak) {
					t.Fatalf("body leaks library text %q: %s", leak, r.body)
				}
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	auth := bearer(token(t, nil))
	// 16 KiB is accepted (and then judged on its content)...
	atLimit := `{"owner":"x"}` + strings.Repeat(" ", 16<<10-len(`{"owner":"x"}`))
	if r := call(t, "POST", gw.URL+"/locks/a/at-limit", atLimit, auth...); r.status != http.StatusCreated {
		t.Fatalf("16 KiB body: got %d %s, want 201", r.status, r.body)
	}
	// ...one byte more is not.
	wantProblem(t, call(t, "POST", gw.URL+"/locks/a/over", atLimit+" ", auth...), http.StatusRequestEntityTooLarge, "payload_too_large")
	wantProblem(t, call(t, "PUT", gw.URL+"/locks/a/over/lease", strings.Repeat("x", 1<<20), with(auth, []string{"Lock-Token", "t"})...),
		http.StatusRequestEntityTooLarge, "payload_too_large")
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	for _, path := range []string{"/", "/locks", "/locks/a/b/c", "/locks/a/b/lease/x", "/healthz/x"} {
		wantProblem(t, call(t, "GET", gw.URL+path, ""), http.StatusNotFound, "not_found")
	}
	for name, tc := range map[string]struct{ method, path, allow string }{
		"patch lock":  {"PATCH", "/locks/a/b", "GET, POST, DELETE"},
		"put lock":    {"PUT", "/locks/a/b", "GET, POST, DELETE"},
		"get lease":   {"GET", "/locks/a/b/lease", "PUT"},
		"post list":   {"POST", "/locks/a", "GET"},
		"post health": {"POST", "/healthz", "GET, HEAD"},
	} {
		t.Run(name, func(t *testing.T) {
			r := call(t, tc.method, gw.URL+tc.path, "")
			wantProblem(t, r, http.StatusMethodNotAllowed, "method_not_allowed")
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Fatalf("Allow: got %q, want %q", got, tc.allow)
			}
		})
	}
}

func TestTokenNeverAcceptedInURL(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	url := gw.URL + "/locks/a/b"
	g := acquire(t, url, "")
	// Neither as a query parameter nor with the header missing.
	wantProblem(t, call(t, "DELETE", url+"?token="+g.Token, "", bearer(token(t, nil))...), http.StatusBadRequest, "invalid_request")
	wantProblem(t, call(t, "DELETE", url+"?Lock-Token="+g.Token, "", bearer(token(t, nil))...), http.StatusBadRequest, "invalid_request")
	var info struct{ Held bool }
	wantJSON(t, call(t, "GET", url, "", bearer(token(t, nil))...), http.StatusOK, &info)
	if !info.Held {
		t.Fatal("a token in the URL released the lock")
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	gw := startGateway(t)
	if got := call(t, "GET", gw.URL+"/healthz", "", "Request-Id", "trace-abc.123").header.Get("Request-Id"); got != "trace-abc.123" {
		t.Fatalf("Request-Id: got %q, want the caller's trace-abc.123", got)
	}
	got := call(t, "GET", gw.URL+"/healthz", "", "Request-Id", "bad id\twith spaces").header.Get("Request-Id")
	if got == "" || strings.ContainsAny(got, " \t") {
		t.Fatalf("Request-Id: got %q, want a fresh safe id", got)
	}
	if !strings.Contains(gw.logs.String(), `"request_id":"trace-abc.123"`) {
		t.Fatal("the access log lacks the request id")
	}
}
