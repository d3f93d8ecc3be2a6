// Package contract checks the gateway's answers against openapi.yaml, for
// the test suites: a body, status or header the contract does not allow
// fails the test that got it, so that a generated client's decoder never
// meets one first. Requests are not checked: many tests send bad ones on
// purpose.
package contract

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

var contract struct {
	once   sync.Once
	router routers.Router
	err    error
}

// contractRouter loads openapi.yaml once, from the module's root.
func contractRouter() (routers.Router, error) {
	contract.once.Do(func() {
		// The JWK Set of /.well-known/lockgate/jwks.json is JSON by another name.
		openapi3filter.RegisterBodyDecoder("application/jwk-set+json", openapi3filter.JSONBodyDecoder)
		_, here, _, _ := runtime.Caller(0)
		loader := openapi3.NewLoader()
		spec, err := loader.LoadFromFile(filepath.Join(filepath.Dir(here), "..", "..", "openapi.yaml"))
		if err != nil {
			contract.err = fmt.Errorf("openapi.yaml: %w", err)
			return
		}
		// Match any host: the gateways listen on random loopback ports.
		spec.Servers = nil
		contract.router, contract.err = legacy.NewRouter(spec)
	})
	return contract.router, contract.err
}

// Check says how an answer (status, header, body) to req breaks the
// contract, or nil. A path the spec does not route (a 404 from the router,
// the metrics and pprof endpoints) is not the contract's.
func Check(ctx context.Context, req *http.Request, status int, header http.Header, body []byte) error {
	router, err := contractRouter()
	if err != nil {
		return err
	}
	u := *req.URL
	u.Host, u.Scheme = "", ""
	r := req.Clone(ctx)
	r.URL = &url.URL{Path: u.Path, RawQuery: u.RawQuery}
	route, params, err := router.FindRoute(r)
	if err != nil {
		return nil
	}
	if status == http.StatusRequestHeaderFieldsTooLarge {
		return nil // net/http's own, in text/plain, before any handler runs
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
		Status:  status,
		Header:  header,
		Body:    io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(ctx, in); err != nil {
		return fmt.Errorf("%s %s answered %d %s, which openapi.yaml does not allow: %w",
			req.Method, u.Path, status, strings.TrimSpace(string(body)), err)
	}
	return nil
}
