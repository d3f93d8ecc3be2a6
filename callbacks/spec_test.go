package callbacks

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/lockgate/lockgate"
)

// TestNotificationIsTheSpecs: what a receiver gets (its headers and body)
// is what openapi.yaml's ticketGranted callback describes, so that
// clients generated from the spec read it as sent.
func TestNotificationIsTheSpecs(t *testing.T) {
	spec, err := openapi3.NewLoader().LoadFromData(lockgate.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	acquire := spec.Paths.Find("/locks/{namespace}/{name}").Post
	cb := acquire.Callbacks["ticketGranted"]
	if cb == nil || cb.Value == nil {
		t.Fatal("openapi.yaml's acquireLock has no ticketGranted callback")
	}
	const expr = "{$request.body#/callback_url}"
	item := cb.Value.Value(expr)
	if item == nil || item.Post == nil {
		t.Fatalf("the ticketGranted callback has no POST at %s", expr)
	}

	srv, _, got := receiver(t, func(int) int { return http.StatusNoContent })
	n, _ := newNotifier(t, []string{srv.URL + "/*"}, nil)
	handed(t, n, srv.URL+"/hook", time.Minute)
	r := waitFor(t, got, 5*time.Second)

	req := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(r.body))
	req.Header = r.header
	route := &routers.Route{Spec: spec, Path: expr, PathItem: item, Method: http.MethodPost, Operation: item.Post}
	err = openapi3filter.ValidateRequest(t.Context(), &openapi3filter.RequestValidationInput{
		Request: req, Route: route, Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	})
	if err != nil {
		t.Fatalf("the notification is not what openapi.yaml says: %v\n%s", err, r.body)
	}
}
