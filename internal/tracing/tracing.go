// Package tracing exports OpenTelemetry traces of the gateway's requests
// and of their calls into the lock engine, when the standard OTEL_*
// environment asks for them; otherwise it adds nothing to a request.
//
// It exports with OTLP over HTTP (protobuf) only: one exporter keeps the
// dependencies small, and every collector and tracing backend speaks it.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracing is the gateway's tracer provider. A nil *Tracing traces nothing.
type Tracing struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
}

// FromEnv reads the standard OpenTelemetry variables through getenv and
// returns nil, and no error, unless they ask for traces:
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none: no traces;
//   - OTEL_TRACES_EXPORTER=otlp, or unset with OTEL_EXPORTER_OTLP_ENDPOINT
//     or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set: OTLP over HTTP to that
//     endpoint (default http://localhost:4318/v1/traces), with
//     OTEL_EXPORTER_OTLP_[TRACES_]HEADERS, as service OTEL_SERVICE_NAME
//     (default lockgate);
//   - another exporter or protocol (grpc) is refused, so that a setting
//     that exports nothing does not pass unnoticed.
//
// The exporter and the SDK also read the other OTEL_ variables they know
// (OTEL_TRACES_SAMPLER, OTEL_BSP_*, timeouts, certificates) from the
// process's environment.
func FromEnv(ctx context.Context, getenv func(string) string) (*Tracing, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); endpoint == "" && base != "" {
		endpoint = strings.TrimSuffix(base, "/") + "/v1/traces"
	}
	switch exporter := getenv("OTEL_TRACES_EXPORTER"); exporter {
	case "none":
		return nil, nil
	case "":
		if endpoint == "" {
			return nil, nil
		}
	case "otlp":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: lockgate exports traces with otlp only (or none)", exporter)
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if protocol != "" && protocol != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: lockgate exports traces with http/protobuf only", protocol)
	}
	var opts []otlptracehttp.Option
	if endpoint != "" {
		if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("OTLP traces endpoint %q: want an http:// or https:// URL", endpoint)
		}
		opts = append(opts, otlptracehttp.WithEndpointURL(endpoint))
	}
	headers, err := parseHeaders(getenv("OTEL_EXPORTER_OTLP_HEADERS"), getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS"))
	if err != nil {
		return nil, err
	}
	if len(headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(headers))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	service := getenv("OTEL_SERVICE_NAME")
	if service == "" {
		service = "lockgate"
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))),
	)
	return &Tracing{provider: tp, tracer: tp.Tracer("github.com/lockgate/lockgate")}, nil
}

// parseHeaders reads OTEL_EXPORTER_OTLP_HEADERS-style lists,
// "key=value,key2=value2" with values URL-encoded; later lists win.
func parseHeaders(lists ...string) (map[string]string, error) {
	headers := make(map[string]string)
	for _, list := range lists {
		for pair := range strings.SplitSeq(list, ",") {
			if strings.TrimSpace(pair) == "" {
				continue
			}
			k, v, ok := strings.Cut(pair, "=")
			value, err := url.QueryUnescape(strings.TrimSpace(v))
			if !ok || strings.TrimSpace(k) == "" || err != nil {
				// Never echo the pair: it may hold an API key.
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: want key=value pairs separated by commas")
			}
			headers[strings.TrimSpace(k)] = value
		}
	}
	return headers, nil
}

// Shutdown exports the spans still buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// untraced are the paths probed or scraped every few seconds: spans of
// them would drown the others.
var untraced = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// Handler traces each request h serves, except probes and scrapes, and
// takes part in a trace the caller started (W3C traceparent). A span
// records the method, path, status and peer: never a header, so never
// the Authorization or Lock-Token one, and never the query. With a nil
// t it returns h.
func (t *Tracing) Handler(h http.Handler) http.Handler {
	if t == nil {
		return h
	}
	return otelhttp.NewHandler(h, "lockgate",
		otelhttp.WithTracerProvider(t.provider),
		otelhttp.WithPropagators(propagation.TraceContext{}),
		otelhttp.WithFilter(func(r *http.Request) bool { return !untraced[r.URL.Path] }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }),
	)
}

// NameByRoute names the request's span after the route chi matched, such
// as "POST /locks/{namespace}/{name}", once the request is served. Mount
// it with the router's top-level Use: only there is the route known
// after next returns.
func NameByRoute(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r)
		span := trace.SpanFromContext(r.Context())
		if !span.IsRecording() {
			return
		}
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			span.SetName(r.Method + " " + rc.RoutePattern())
			span.SetAttributes(attribute.String("http.route", rc.RoutePattern()))
		}
	})
}
