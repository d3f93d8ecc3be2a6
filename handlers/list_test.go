package handlers

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// TestQueryChecksMatchKinOpenAPI holds the gate's checks of query
// parameters to kin-openapi's, as FuzzChecksMatchKinOpenAPI does for path
// and header parameters and bodies.
func TestQueryChecksMatchKinOpenAPI(t *testing.T) {
	spec, err := GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGate(spec, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	noAuth := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, SkipSettingDefaults: true}
	path := "/locks/{namespace}"
	item := spec.Paths.Find(path)
	op := item.Get
	for _, q := range []string{"", "limit=5", "limit=0", "limit=1", "limit=1000", "limit=1001", "limit=-1", "limit=ten",
		"limit=1.5", "limit=1e2", "limit=", "limit=99999999999999999999", "cursor=abc", "cursor=", "cursor=" + strings.Repeat("a", 513),
		"cursor=" + strings.Repeat("a", 512), "cursor=a&cursor=b", "limit=3&limit=x", "other=1", "limit=%20", "limit=+5", "limit=05"} {
		for _, ns := range []string{"billing", "Billing"} {
			params := map[string]string{"namespace": ns}
			got := g.ops["GET "+path].checks.check(httptest.NewRequest("GET", "/x?"+q, nil), nil, func(k string) string { return params[k] })
			route := &routers.Route{Spec: spec, Path: path, PathItem: item, Method: "GET", Operation: op}
			var want error
			if err := openapi3filter.ValidateRequest(t.Context(), &openapi3filter.RequestValidationInput{
				Request: httptest.NewRequest("GET", "/x?"+q, nil), PathParams: params, Route: route, Options: noAuth}); err != nil {
				want = kinError(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("ns %s query %q:\ngot  %v\nwant %v", ns, q, got, want)
			}
		}
	}
}
