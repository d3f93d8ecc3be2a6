package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lockgate/lockgate/locks"
)

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		on      bool
		wantErr string
	}{
		{name: "nothing set", env: nil},
		{name: "endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, on: true},
		{name: "traces endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://c.example/v1/traces"}, on: true},
		{name: "otlp exporter, default endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true},
		{name: "none wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://x:1"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "other exporter", env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: "otlp only"},
		{name: "grpc", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantErr: "http/protobuf only"},
		{name: "bad endpoint", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"}, wantErr: "http:// or https://"},
		{name: "bad headers", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "api-key"}, wantErr: "key=value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := FromEnv(t.Context(), func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (tr != nil) != tc.on {
				t.Fatalf("got tracing %v, want %v", tr != nil, tc.on)
			}
			tr.Shutdown(t.Context())
		})
	}
}

func TestParseHeaders(t *testing.T) {
	h, err := parseHeaders("api-key=a%3Db, x = y ", "x=z")
	if err != nil || h["api-key"] != "a=b" || h["x"] != "z" || len(h) != 2 {
		t.Fatalf("got %v, %v; want api-key=a=b, x=z", h, err)
	}
	if _, err := parseHeaders("secret-value-no-key"); err == nil || strings.Contains(err.Error(), "secret-value") {
		t.Fatalf("got %v, want an error that does not echo the pair", err)
	}
}

// TestSpanOutcome: a span says how its call ended in the engine's words,
// and only a failure of the backend or the gateway marks it an error.
func TestSpanOutcome(t *testing.T) {
	for _, tc := range []struct {
		err     error
		outcome string
		isError bool
	}{
		{nil, "ok", false},
		{&locks.HeldError{}, "held", false},
		{&locks.FullError{}, "held", false},
		{&locks.NotHolderError{Reason: locks.ReasonExpired}, "not_holder", false},
		{locks.ErrTicketNotFound, "ticket_not_found", false},
		{fmt.Errorf("%w: ttl", locks.ErrInvalid), "invalid", false},
		{context.Canceled, "cancelled", false},
		{fmt.Errorf("acquire: %w: %w", locks.ErrUnavailable, context.DeadlineExceeded), "unavailable", true},
		{errors.New("boom"), "error", true},
	} {
		rec := tracetest.NewSpanRecorder()
		_, span := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t").Start(t.Context(), "call")
		end(span, tc.err)
		s := rec.Ended()[0]
		var got string
		for _, a := range s.Attributes() {
			if a.Key == "lockgate.outcome" {
				got = a.Value.AsString()
			}
		}
		if got != tc.outcome || (s.Status().Code == codes.Error) != tc.isError {
			t.Errorf("%v: got outcome %q, error status %v; want %q, %v", tc.err, got, s.Status().Code == codes.Error, tc.outcome, tc.isError)
		}
	}
}
