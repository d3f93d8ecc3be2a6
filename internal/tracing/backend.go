package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockgate/lockgate/locks"
)

// Backend returns b with a span around each call into the engine, a
// child of the request's span: for the Redis backend, the script's round
// trip (and its wait in the batcher), which is why the gateway does not
// use go-redis's own tracing hook, whose pipelines carry the calls of many
// requests at once. A span names the lock and the outcome, never a token.
// With a nil t it returns b.
func (t *Tracing) Backend(b locks.Backend) locks.Backend {
	if t == nil {
		return b
	}
	return &tracedBackend{Backend: b, tracer: t.tracer}
}

// tracedBackend traces the calls that serve requests; the others (Check,
// Close, and any it does not know) pass through.
type tracedBackend struct {
	locks.Backend
	tracer trace.Tracer
}

func (tb *tracedBackend) start(ctx context.Context, name string, key locks.Key) (context.Context, trace.Span) {
	return startSpan(ctx, tb.tracer, name, key)
}

// startSpan starts the span of an engine call named name on key.
func startSpan(ctx context.Context, tracer trace.Tracer, name string, key locks.Key) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{attribute.String("lockgate.namespace", key.Namespace)}
	if key.Name != "" {
		attrs = append(attrs, attribute.String("lockgate.name", key.Name))
	}
	return tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

// spanOutcomes are the "lockgate.outcome" values that differ from the
// engine's code of the error (locks.ErrorCode): a full semaphore is held,
// as a held lock is, and a call without an error is ok.
var spanOutcomes = map[locks.Code]string{
	locks.CodeOK:       "ok",
	locks.CodeFull:     "held",
	locks.CodeInternal: "error",
}

// end records err's outcome on span, by its code: the text of an error may
// name a Redis address, and tells a trace reader nothing the code does not.
// A failure of the backend, or of the gateway, marks the span an error.
func end(span trace.Span, err error) {
	code := locks.ErrorCode(err)
	outcome, ok := spanOutcomes[code]
	if !ok {
		outcome = string(code)
	}
	if code == locks.CodeUnavailable || code == locks.CodeInternal {
		span.SetStatus(codes.Error, outcome)
	}
	span.SetAttributes(attribute.String("lockgate.outcome", outcome))
	span.End()
}

func (tb *tracedBackend) Acquire(ctx context.Context, key locks.Key, req locks.AcquireRequest) (locks.Grant, error) {
	ctx, span := tb.start(ctx, "lock.acquire", key)
	g, err := tb.Backend.Acquire(ctx, key, req)
	end(span, err)
	return g, err
}

func (tb *tracedBackend) AcquireOnce(ctx context.Context, key locks.Key, req locks.AcquireRequest, idemKey string) (locks.Grant, error) {
	ctx, span := tb.start(ctx, "lock.acquire", key)
	g, err := tb.Backend.AcquireOnce(ctx, key, req, idemKey)
	end(span, err)
	return g, err
}

func (tb *tracedBackend) AcquirePermitOnce(ctx context.Context, key locks.Key, req locks.SemaphoreRequest, idemKey string) (locks.Grant, error) {
	ctx, span := tb.start(ctx, "semaphore.acquire", key)
	g, err := tb.Backend.AcquirePermitOnce(ctx, key, req, idemKey)
	end(span, err)
	return g, err
}

func (tb *tracedBackend) Release(ctx context.Context, key locks.Key, token string) (locks.Released, error) {
	ctx, span := tb.start(ctx, "lock.release", key)
	rel, err := tb.Backend.Release(ctx, key, token)
	end(span, err)
	return rel, err
}

func (tb *tracedBackend) ReleaseHold(ctx context.Context, key locks.Key, token, hold string) (locks.Released, error) {
	ctx, span := tb.start(ctx, "lock.release", key)
	rel, err := tb.Backend.ReleaseHold(ctx, key, token, hold)
	end(span, err)
	return rel, err
}

func (tb *tracedBackend) Reenter(ctx context.Context, key locks.Key, token string, ttl time.Duration, mode locks.Mode) (locks.Grant, error) {
	ctx, span := tb.start(ctx, "lock.reenter", key)
	g, err := tb.Backend.Reenter(ctx, key, token, ttl, mode)
	end(span, err)
	return g, err
}

func (tb *tracedBackend) Renew(ctx context.Context, key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
	ctx, span := tb.start(ctx, "lock.renew", key)
	l, err := tb.Backend.Renew(ctx, key, token, ttl)
	end(span, err)
	return l, err
}

// SetValue traces the call, never the value.
func (tb *tracedBackend) SetValue(ctx context.Context, key locks.Key, token, value string) (int64, error) {
	ctx, span := tb.start(ctx, "lock.set_value", key)
	fence, err := tb.Backend.SetValue(ctx, key, token, value)
	end(span, err)
	return fence, err
}

func (tb *tracedBackend) Inspect(ctx context.Context, key locks.Key) (locks.Info, error) {
	ctx, span := tb.start(ctx, "lock.inspect", key)
	info, err := tb.Backend.Inspect(ctx, key)
	end(span, err)
	return info, err
}

func (tb *tracedBackend) List(ctx context.Context, namespace, cursor string, limit int) (locks.Page, error) {
	ctx, span := tb.start(ctx, "lock.list", locks.Key{Namespace: namespace})
	page, err := tb.Backend.List(ctx, namespace, cursor, limit)
	end(span, err)
	return page, err
}

func (tb *tracedBackend) AcquirePermit(ctx context.Context, key locks.Key, req locks.SemaphoreRequest) (locks.Grant, error) {
	ctx, span := tb.start(ctx, "semaphore.acquire", key)
	g, err := tb.Backend.AcquirePermit(ctx, key, req)
	end(span, err)
	return g, err
}

func (tb *tracedBackend) ReleasePermit(ctx context.Context, key locks.Key, token string) (locks.Released, error) {
	ctx, span := tb.start(ctx, "semaphore.release", key)
	rel, err := tb.Backend.ReleasePermit(ctx, key, token)
	end(span, err)
	return rel, err
}

func (tb *tracedBackend) RenewPermit(ctx context.Context, key locks.Key, token string, ttl time.Duration) (locks.Lease, error) {
	ctx, span := tb.start(ctx, "semaphore.renew", key)
	l, err := tb.Backend.RenewPermit(ctx, key, token, ttl)
	end(span, err)
	return l, err
}

func (tb *tracedBackend) InspectSemaphore(ctx context.Context, key locks.Key) (locks.SemaphoreInfo, error) {
	ctx, span := tb.start(ctx, "semaphore.inspect", key)
	info, err := tb.Backend.InspectSemaphore(ctx, key)
	end(span, err)
	return info, err
}

func (tb *tracedBackend) ResizeSemaphore(ctx context.Context, key locks.Key, limit int) (locks.SemaphoreSize, error) {
	ctx, span := tb.start(ctx, "semaphore.resize", key)
	size, err := tb.Backend.ResizeSemaphore(ctx, key, limit)
	end(span, err)
	return size, err
}

// Tickets returns tk with a span around each of its calls, as Backend does
// for the lock's: a long-poll's span lasts as long as the poll. With a nil
// t, or a nil tk (a backend without tickets), it returns tk.
func (t *Tracing) Tickets(tk locks.Tickets) locks.Tickets {
	if t == nil || tk == nil {
		return tk
	}
	return &tracedTickets{Tickets: tk, tracer: t.tracer}
}

type tracedTickets struct {
	locks.Tickets
	tracer trace.Tracer
}

// The tickets of a traced backend are traced as Tickets traces them.

func (tb *tracedBackend) OpenTicket(ctx context.Context, key locks.Key, req locks.AcquireRequest) (locks.TicketState, error) {
	return (&tracedTickets{tb.Backend, tb.tracer}).OpenTicket(ctx, key, req)
}

func (tb *tracedBackend) PollTicket(ctx context.Context, key locks.Key, id, token string, wait time.Duration) (locks.TicketState, error) {
	return (&tracedTickets{tb.Backend, tb.tracer}).PollTicket(ctx, key, id, token, wait)
}

func (tb *tracedBackend) CloseTicket(ctx context.Context, key locks.Key, id, token string) error {
	return (&tracedTickets{tb.Backend, tb.tracer}).CloseTicket(ctx, key, id, token)
}

func (tt *tracedTickets) OpenTicket(ctx context.Context, key locks.Key, req locks.AcquireRequest) (locks.TicketState, error) {
	ctx, span := startSpan(ctx, tt.tracer, "ticket.open", key)
	st, err := tt.Tickets.OpenTicket(ctx, key, req)
	end(span, err)
	return st, err
}

func (tt *tracedTickets) PollTicket(ctx context.Context, key locks.Key, id, token string, wait time.Duration) (locks.TicketState, error) {
	ctx, span := startSpan(ctx, tt.tracer, "ticket.poll", key)
	st, err := tt.Tickets.PollTicket(ctx, key, id, token, wait)
	end(span, err)
	return st, err
}

func (tt *tracedTickets) CloseTicket(ctx context.Context, key locks.Key, id, token string) error {
	ctx, span := startSpan(ctx, tt.tracer, "ticket.close", key)
	err := tt.Tickets.CloseTicket(ctx, key, id, token)
	end(span, err)
	return err
}

// SessionsOf passes locks.SessionLister through, for the dashboard: a
// backend without it lists none.
func (tb *tracedBackend) SessionsOf(ctx context.Context, subject string) ([]locks.SessionSummary, error) {
	sl, ok := tb.Backend.(locks.SessionLister)
	if !ok {
		return []locks.SessionSummary{}, nil
	}
	return sl.SessionsOf(ctx, subject)
}
