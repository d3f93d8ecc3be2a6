package handlers

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lockgate/lockgate/locks"
)

// The bounds of the tools' arguments that the API's spec sets on its
// parameters (TestMCPBoundsAgreeWithSpec holds them to it).
const (
	mcpTokenMaxLen  = 256  // LockToken's maxLength
	mcpListMax      = 1000 // Limit's maximum
	mcpCursorMaxLen = 512  // Cursor's maxLength
)

// mcpDefaultWatchWait is wait_for_change's wait without wait_ms: shorter
// than the API's (DefaultWatchWait), since MCP clients commonly give up
// on a tool call after a minute.
const mcpDefaultWatchWait = 30 * time.Second

// The tools' arguments. Descriptions are what a model reads.
type (
	acquireArgs struct {
		Namespace string  `json:"namespace"`
		Name      string  `json:"name"`
		TTLMs     *int64  `json:"ttl_ms,omitempty" jsonschema:"lease length in milliseconds: the lock is freed this long after the grant unless renewed (renew_lease); the gateway's default when left out"`
		WaitMs    *int64  `json:"wait_ms,omitempty" jsonschema:"how long to wait for a held lock, in milliseconds; 0 or left out: fail at once with lock_held"`
		Owner     *string `json:"owner,omitempty" jsonschema:"a free-form label that others see when they inspect the lock: who you are and what for"`
		MaxHoldMs *int64  `json:"max_hold_ms,omitempty" jsonschema:"a hard cap on the grant in milliseconds, from the grant: no renewal carries the lease past it (hold_until says when); at least ttl_ms; the gateway's own cap when left out"`
		MinHoldMs *int64  `json:"min_hold_ms,omitempty" jsonschema:"keep the lock from everyone else, you included, until this many milliseconds after the grant, even once released: a job that runs at most once per window; 0 or left out: none"`
		Priority  *int    `json:"priority,omitempty" jsonschema:"for a wait (wait_ms): 0 (the default) to 9; a higher priority is served first, first come first served within one, and a waiter's priority rises by one every aging period of the gateway's, so none waits forever"`
	}
	tokenArgs struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		Token     string `json:"token" jsonschema:"the token acquire_lock returned"`
	}
	renewArgs struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		Token     string `json:"token" jsonschema:"the token acquire_lock returned"`
		TTLMs     *int64 `json:"ttl_ms,omitempty" jsonschema:"the new lease's length in milliseconds, from now; the grant's own when left out"`
	}
	lockArgs struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	}
	listArgs struct {
		Namespace string  `json:"namespace"`
		Limit     *int    `json:"limit,omitempty" jsonschema:"the most locks in the answer; 100 when left out"`
		Cursor    *string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous answer, for the next page"`
	}
	watchArgs struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
		Index     int64  `json:"index,omitempty" jsonschema:"the index of the last answer of wait_for_change; 0 or left out: answer at once with the lock's state and index"`
		WaitMs    *int64 `json:"wait_ms,omitempty" jsonschema:"how long to wait for a change, in milliseconds; 30000 when left out"`
	}
)

// The tools' results.
type (
	mcpGrant struct {
		Lock         string     `json:"lock" jsonschema:"namespace/name"`
		Token        string     `json:"token" jsonschema:"the grant's secret: pass it to renew_lease and release_lock, and to nobody else"`
		FencingToken int64      `json:"fencing_token" jsonschema:"grows with every grant of the lock: give it to the resource the lock protects, which refuses a lower one than it has seen"`
		TTLMs        int64      `json:"ttl_ms" jsonschema:"the lease's length in milliseconds"`
		RenewAfterMs int64      `json:"renew_after_ms" jsonschema:"renew after this many milliseconds to keep the lock"`
		ExpiresAt    time.Time  `json:"expires_at" jsonschema:"when the lease ends unless renewed (RFC 3339)"`
		HoldUntil    *time.Time `json:"hold_until,omitempty" jsonschema:"with a hard cap (max_hold_ms, or the gateway's): when it ends the grant, which no renewal passes (RFC 3339)"`
	}
	mcpRelease struct {
		Lock     string `json:"lock" jsonschema:"namespace/name"`
		Released bool   `json:"released" jsonschema:"true: the token no longer holds the lock"`
		Holds    int    `json:"holds" jsonschema:"holds of the token's grant left (re-entered through the HTTP API); 0: the lock is free of it"`
	}
	mcpLease struct {
		Lock         string     `json:"lock" jsonschema:"namespace/name"`
		FencingToken int64      `json:"fencing_token" jsonschema:"the grant's fencing token, unchanged by renewing"`
		TTLMs        int64      `json:"ttl_ms" jsonschema:"the new lease's length in milliseconds"`
		RenewAfterMs int64      `json:"renew_after_ms" jsonschema:"renew again after this many milliseconds"`
		ExpiresAt    time.Time  `json:"expires_at" jsonschema:"when the lease ends unless renewed (RFC 3339)"`
		HoldUntil    *time.Time `json:"hold_until,omitempty" jsonschema:"with a hard cap: when it ends the grant; a renewal that asks for more ends there (RFC 3339)"`
	}
	mcpLock struct {
		Lock         string    `json:"lock" jsonschema:"namespace/name"`
		Held         bool      `json:"held" jsonschema:"whether anyone holds the lock; the other fields are left out when not"`
		Mode         string    `json:"mode,omitempty" jsonschema:"exclusive or shared"`
		FencingToken int64     `json:"fencing_token,omitempty" jsonschema:"the fencing token of the latest grant"`
		Subject      string    `json:"subject,omitempty" jsonschema:"who holds it: the holder's token's issuer and subject"`
		Owner        string    `json:"owner,omitempty" jsonschema:"the holder's owner label"`
		AcquiredAt   time.Time `json:"acquired_at,omitzero" jsonschema:"when it was acquired (RFC 3339)"`
		ExpiresAt    time.Time `json:"expires_at,omitzero" jsonschema:"when its lease ends unless renewed (RFC 3339)"`
		TTLMs        int64     `json:"ttl_ms,omitempty" jsonschema:"milliseconds left of the lease"`
		Waiters      int       `json:"waiters,omitempty" jsonschema:"how many callers wait for it"`
		HoldersTotal int       `json:"holders_total,omitempty" jsonschema:"how many grants hold it (more than 1 only when shared)"`
		Value        string    `json:"value,omitempty" jsonschema:"the value its holder set, if any"`
	}
	mcpList struct {
		Locks      []mcpLock `json:"locks" jsonschema:"the held locks of the namespace, in name order"`
		NextCursor string    `json:"next_cursor,omitempty" jsonschema:"pass it as cursor for the next page; left out on the last"`
	}
	mcpChange struct {
		Index   int64 `json:"index" jsonschema:"the lock's index: pass it to the next wait_for_change"`
		Changed bool  `json:"changed" jsonschema:"whether the index differs from the one you passed (false: the wait ran out)"`
		mcpLock
	}
)

// addMCPTools adds the lock tools to srv: each makes the call the API's
// handler makes, after the namespace check the gate makes (mcpKey).
func (s *Server) addMCPTools(srv *mcp.Server) {
	no := false
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: &no}
	addMCPTool(srv, &mcp.Tool{Name: "acquire_lock", Title: "Acquire a lock",
		Description: "Take the lock namespace/name as a lease, waiting up to wait_ms if someone holds it. Returns the token " +
			"(keep it secret: it renews and releases the grant) and the fencing_token. Fails with lock_held when the lock " +
			"stays held; its detail says when the holder's lease ends.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, OpenWorldHint: &no},
	}, func(in *jsonschema.Schema) {
		describeTTL("ttl_ms", "wait_ms", "max_hold_ms", "min_hold_ms")(in)
		describePriority(in)
	}, s.mcpAcquire)
	addMCPTool(srv, &mcp.Tool{Name: "release_lock", Title: "Release a lock",
		Description: "Give back the grant of token on namespace/name, so that the next waiter gets the lock at once. " +
			"Releasing again is harmless for a minute; a token that no longer holds the lock fails with not_holder, " +
			"whose reason says why (released, expired, broken).",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no},
	}, describeToken, s.mcpRelease)
	addMCPTool(srv, &mcp.Tool{Name: "renew_lease", Title: "Renew a lease",
		Description: "Extend the lease of token's grant on namespace/name to ttl_ms from now, keeping its fencing token. " +
			"Renew after renew_after_ms; a grant whose lease ended fails with not_holder.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &no},
	}, func(in *jsonschema.Schema) { describeToken(in); describeTTL("ttl_ms")(in) }, s.mcpRenew)
	addMCPTool(srv, &mcp.Tool{Name: "inspect_lock", Title: "Inspect a lock",
		Description: "Say whether namespace/name is held, and by whom, since when and until when. Never shows a token.",
		Annotations: readOnly,
	}, nil, s.mcpInspect)
	addMCPTool(srv, &mcp.Tool{Name: "list_locks", Title: "List held locks",
		Description: "List the held locks of a namespace, a page at a time, as inspect_lock describes each.",
		Annotations: readOnly,
	}, describeList, s.mcpList)
	addMCPTool(srv, &mcp.Tool{Name: "wait_for_change", Title: "Wait for a lock to change",
		Description: "Wait until namespace/name changes (acquired, released, expired, ...) after index, then return its state " +
			"and its new index; call it first with index 0 (or none) for the state now. Returns with changed false when " +
			"wait_ms runs out first. Cheaper than polling inspect_lock.",
		Annotations: readOnly,
	}, describeWatch, s.mcpWatch)
}

func (s *Server) mcpAcquire(ctx context.Context, in acquireArgs) (mcpGrant, error) {
	if _, err := mcpKey(ctx, in.Namespace, in.Name); err != nil {
		return mcpGrant{}, err
	}
	resp, err := s.AcquireLock(ctx, AcquireLockRequestObject{Namespace: in.Namespace, Name: in.Name,
		Body: &AcquireRequest{TtlMs: in.TTLMs, WaitMs: in.WaitMs, Owner: in.Owner, MaxHoldMs: in.MaxHoldMs, MinHoldMs: in.MinHoldMs,
			Priority: in.Priority}})
	// Not a re-entry or a ticket, which these arguments cannot ask for.
	g, err := mcpAnswer[*granted]("acquire_lock", resp, err)
	if err != nil {
		return mcpGrant{}, err
	}
	return mcpGrant{Lock: g.lock.Lock, Token: g.lock.Token, FencingToken: g.lock.FencingToken,
		TTLMs: g.lock.TtlMs, RenewAfterMs: g.lock.RenewAfterMs, ExpiresAt: g.lock.ExpiresAt, HoldUntil: g.lock.HoldUntil}, nil
}

func (s *Server) mcpRelease(ctx context.Context, in tokenArgs) (mcpRelease, error) {
	key, err := mcpTokenKey(ctx, in.Namespace, in.Name, in.Token)
	if err != nil {
		return mcpRelease{}, err
	}
	resp, err := s.ReleaseLock(ctx, ReleaseLockRequestObject{Namespace: in.Namespace, Name: in.Name,
		Params: ReleaseLockParams{LockToken: in.Token}})
	if err != nil {
		return mcpRelease{}, err
	}
	out := mcpRelease{Lock: key.String(), Released: true}
	if r, ok := resp.(ReleaseLock200JSONResponse); ok {
		out.Holds = r.Holds
	}
	return out, nil
}

func (s *Server) mcpRenew(ctx context.Context, in renewArgs) (mcpLease, error) {
	if _, err := mcpTokenKey(ctx, in.Namespace, in.Name, in.Token); err != nil {
		return mcpLease{}, err
	}
	resp, err := s.RenewLease(ctx, RenewLeaseRequestObject{Namespace: in.Namespace, Name: in.Name,
		Params: RenewLeaseParams{LockToken: in.Token}, Body: &RenewRequest{TtlMs: in.TTLMs}})
	r, err := mcpAnswer[RenewLease200JSONResponse]("renew_lease", resp, err)
	if err != nil {
		return mcpLease{}, err
	}
	return mcpLease{Lock: r.Lock, FencingToken: r.FencingToken, TTLMs: r.TtlMs, RenewAfterMs: r.RenewAfterMs, ExpiresAt: r.ExpiresAt, HoldUntil: r.HoldUntil}, nil
}

func (s *Server) mcpInspect(ctx context.Context, in lockArgs) (mcpLock, error) {
	key, err := mcpKey(ctx, in.Namespace, in.Name)
	if err != nil {
		return mcpLock{}, err
	}
	resp, err := s.InspectLock(ctx, InspectLockRequestObject{Namespace: in.Namespace, Name: in.Name})
	r, err := mcpAnswer[freshInspect]("inspect_lock", resp, err)
	if err != nil {
		return mcpLock{}, err
	}
	if r.free != nil {
		// The API's 404 not_held; to a tool, a free lock is an answer.
		return mcpLock{Lock: key.String()}, nil
	}
	return mcpLockOf(r.Body), nil
}

func (s *Server) mcpList(ctx context.Context, in listArgs) (mcpList, error) {
	if !locks.ValidNamespace(in.Namespace) {
		return mcpList{}, invalid("a namespace is " + locks.NamespaceRule)
	}
	if err := mcpGrants(ctx, in.Namespace); err != nil {
		return mcpList{}, err
	}
	if l := in.Limit; l != nil && (*l < 1 || *l > mcpListMax) {
		return mcpList{}, invalid("limit must be between 1 and " + strconv.Itoa(mcpListMax))
	}
	if c := in.Cursor; c != nil && (*c == "" || len(*c) > mcpCursorMaxLen) {
		return mcpList{}, invalid("cursor must be the next_cursor of a listing")
	}
	resp, err := s.ListLocks(ctx, ListLocksRequestObject{Namespace: in.Namespace, Params: ListLocksParams{Limit: in.Limit, Cursor: in.Cursor}})
	r, err := mcpAnswer[ListLocks200JSONResponse]("list_locks", resp, err)
	if err != nil {
		return mcpList{}, err
	}
	out := mcpList{Locks: make([]mcpLock, len(r.Locks))}
	for i, l := range r.Locks {
		out.Locks[i] = mcpLockOf(LockInfo{Lock: l.Lock, Held: l.Held, Mode: LockInfoMode(l.Mode), FencingToken: l.FencingToken,
			Subject: l.Subject, Owner: l.Owner, AcquiredAt: l.AcquiredAt, ExpiresAt: l.ExpiresAt, TtlMs: l.TtlMs,
			Waiters: l.Waiters, HoldersTotal: l.HoldersTotal, Value: l.Value})
	}
	if r.NextCursor != nil {
		out.NextCursor = *r.NextCursor
	}
	return out, nil
}

// mcpWatch is the API's long-poll (GET ?index=&wait=) as a tool.
func (s *Server) mcpWatch(ctx context.Context, in watchArgs) (mcpChange, error) {
	key, err := mcpKey(ctx, in.Namespace, in.Name)
	if err != nil {
		return mcpChange{}, err
	}
	wait := mcpDefaultWatchWait
	if in.WaitMs != nil {
		if ms := *in.WaitMs; ms < 1 || ms > MaxWatchWait.Milliseconds() {
			return mcpChange{}, invalid(fmt.Sprintf("wait_ms must be between 1 and %d", MaxWatchWait.Milliseconds()))
		}
		wait = time.Duration(*in.WaitMs) * time.Millisecond
	}
	waitParam := strconv.FormatInt(wait.Milliseconds(), 10)
	resp, err := s.InspectLock(ctx, InspectLockRequestObject{Namespace: in.Namespace, Name: in.Name,
		Params: InspectLockParams{Index: &in.Index, Wait: &waitParam}})
	w, err := mcpAnswer[*lockWatch]("wait_for_change", resp, err)
	if err != nil {
		return mcpChange{}, err
	}
	defer w.done()
	c, err := w.poll(w.look)
	if err != nil {
		return mcpChange{}, err
	}
	out := mcpChange{Index: c.index, Changed: c.index != in.Index, mcpLock: mcpLock{Lock: key.String()}}
	if info, held := c.body.(LockInfo); held {
		out.mcpLock = mcpLockOf(info)
	}
	return out, nil
}

// mcpLockOf is what the tools say of a held lock, from what the API says.
func mcpLockOf(l LockInfo) mcpLock {
	out := mcpLock{Lock: l.Lock, Held: l.Held, Mode: string(l.Mode), FencingToken: l.FencingToken, Subject: l.Subject,
		Owner: l.Owner, AcquiredAt: l.AcquiredAt, ExpiresAt: l.ExpiresAt, TTLMs: l.TtlMs, Waiters: l.Waiters, HoldersTotal: l.HoldersTotal}
	if l.Value != nil {
		out.Value = *l.Value
	}
	return out
}

// mcpAnswer is the answer resp of the API's handler that tool calls, or
// its error: err, or that the handler answered something else than T.
func mcpAnswer[T any](tool string, resp any, err error) (T, error) {
	var zero T
	if err != nil {
		return zero, err
	}
	r, ok := resp.(T)
	if !ok {
		return zero, fmt.Errorf("%s: unexpected answer %T", tool, resp)
	}
	return r, nil
}

// mcpTokenKey is mcpKey for a tool that also takes a grant's token, which
// it bounds (checkToken).
func mcpTokenKey(ctx context.Context, namespace, name, token string) (locks.Key, error) {
	key, err := mcpKey(ctx, namespace, name)
	if err == nil {
		err = checkToken(token)
	}
	return key, err
}

// checkToken bounds a token as the spec bounds the Lock-Token header.
func checkToken(token string) error {
	if token == "" || len(token) > mcpTokenMaxLen {
		return invalid("token must be the token acquire_lock returned (1 to " + strconv.Itoa(mcpTokenMaxLen) + " characters)")
	}
	return nil
}

// describeArgs describes the arguments that several tools take.
func describeArgs(in *jsonschema.Schema) {
	if p := in.Properties["namespace"]; p != nil {
		p.Description = "the lock's namespace, which your token must grant: " + locks.NamespaceRule
	}
	if p := in.Properties["name"]; p != nil {
		p.Description = "the lock's name within the namespace: " + locks.NameRule
	}
	if p := in.Properties["owner"]; p != nil {
		most := locks.MaxOwnerLen
		p.MaxLength = &most
	}
	for _, p := range in.Properties {
		// A pointer's schema allows null, which means "left out" here:
		// say only the type, as the API's schemas do.
		if len(p.Types) == 2 && p.Types[0] == "null" {
			p.Type, p.Types = p.Types[1], nil
		}
	}
}

// describeTTL bounds the millisecond arguments named as the API bounds them.
func describeTTL(names ...string) func(*jsonschema.Schema) {
	return func(in *jsonschema.Schema) {
		for _, n := range names {
			if p := in.Properties[n]; p != nil {
				minimum := 1.0
				if n == "wait_ms" || n == "min_hold_ms" {
					minimum = 0
				}
				p.Minimum = &minimum
			}
		}
	}
}

// describePriority bounds priority as locks.AcquireRequest does.
func describePriority(in *jsonschema.Schema) {
	if p := in.Properties["priority"]; p != nil {
		lo, hi := 0.0, float64(locks.MaxPriority)
		p.Minimum, p.Maximum = &lo, &hi
	}
}

func describeToken(in *jsonschema.Schema) {
	if p := in.Properties["token"]; p != nil {
		one, most := 1, mcpTokenMaxLen
		p.MinLength, p.MaxLength = &one, &most
	}
}

func describeList(in *jsonschema.Schema) {
	one, most := 1.0, float64(mcpListMax)
	in.Properties["limit"].Minimum, in.Properties["limit"].Maximum = &one, &most
	minLen, maxLen := 1, mcpCursorMaxLen
	in.Properties["cursor"].MinLength, in.Properties["cursor"].MaxLength = &minLen, &maxLen
}

func describeWatch(in *jsonschema.Schema) {
	zero, one, most := 0.0, 1.0, float64(MaxWatchWait.Milliseconds())
	in.Properties["index"].Minimum = &zero
	in.Properties["wait_ms"].Minimum, in.Properties["wait_ms"].Maximum = &one, &most
}
