package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestInflightWaitsForHandlers(t *testing.T) {
	f := newInflight()
	entered, release := make(chan struct{}), make(chan struct{})
	h := f.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		close(entered)
		<-release
	}))
	served := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		close(served)
	}()
	<-entered

	short, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if n := f.wait(short); n != 1 {
		t.Fatalf("wait with a handler running: got %d, want 1", n)
	}
	close(release)
	if n := f.wait(t.Context()); n != 0 {
		t.Fatalf("wait once it returned: got %d, want 0", n)
	}
	<-served

	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Fatalf("a request after wait: got panic %v, want http.ErrAbortHandler", v)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
}
