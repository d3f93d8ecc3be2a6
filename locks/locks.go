package locks

import (
	"context"
	"fmt"
	"time"
)

// Locker is what every backend offers. All methods are safe for concurrent
// use. Backend failures are reported as errors that match ErrUnavailable.
type Locker interface {
	// Acquire takes the lock for req.TTL. When the lock is held it returns an
	// error matching ErrHeld (a *HeldError with the holder's remaining TTL),
	// unless req.Wait > 0, in which case it joins the lock's queue for up to
	// req.Wait. Waiters get the lock in arrival order: a release or expiry
	// hands it straight to the first one, and nobody who arrives later, or
	// who just released it, gets ahead of them.
	Acquire(ctx context.Context, key Key, req AcquireRequest) (Grant, error)

	// Release ends the base hold of the grant token holds: the one its
	// acquire made. It is ReleaseHold with BaseHold.
	Release(ctx context.Context, key Key, token string) (Released, error)

	// ReleaseHold ends the hold named hold of the grant token holds (""
	// or BaseHold: the base hold; else the Grant.Hold of a Reenter). The
	// last hold ends the grant, and frees the lock (and hands it on)
	// unless other grants hold it shared. A hold that has ended already,
	// by an earlier release, changes nothing: a retried release is
	// harmless. A token that does not hold the lock gets ErrNotHolder and
	// changes nothing.
	ReleaseHold(ctx context.Context, key Key, token, hold string) (Released, error)

	// Reenter takes the lock once more for the holder of token (a
	// re-entrant hold) in the same mode: the grant keeps its fencing token,
	// its lease becomes at least ttl from now (never shorter), Grant.Hold
	// names the new hold, and Grant.Holds counts the holds. ReleaseHold
	// ends a hold by its name; the lease ends them all. A token that does
	// not hold the lock gets ErrNotHolder; a holder that asks for the
	// other mode (an upgrade from shared to exclusive, say) gets a
	// *HeldError, and keeps what it holds. A re-entry whose outcome is
	// unknown (ErrUnavailable) is undone: its hold, if it was taken, ends.
	Reenter(ctx context.Context, key Key, token string, ttl time.Duration, mode Mode) (Grant, error)

	// Renew extends the lease of the current holder to ttl from now (ttl 0
	// means the TTL the grant was acquired with; otherwise at least 1 ms). It returns ErrNotHolder if
	// token does not hold the lock; it never brings back an expired lease.
	Renew(ctx context.Context, key Key, token string, ttl time.Duration) (Lease, error)

	// Inspect describes the current holders, and the lock's index
	// (Info.Index), or returns ErrNotHeld, as a *NotHeldError with the
	// index. It never reveals an owner token.
	Inspect(ctx context.Context, key Key) (Info, error)
}

// Key names a lock: a namespace (the unit of authorisation) and a name.
type Key struct {
	Namespace string
	Name      string
}

// The patterns of the public API (openapi.yaml). ValidNamespace and
// ValidName check them byte by byte: the regexps cost about 2 % of the
// gateway's CPU. FuzzKeyPatterns holds them to the same set.
const (
	NamespacePattern = `^[a-z0-9][a-z0-9_-]{0,62}$`
	NamePattern      = `^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$`
)

// The patterns in words, for callers who got one wrong: a regexp is the
// contract, not an explanation.
const (
	NamespaceRule = "1 to 63 lower-case letters, digits, '_' or '-', starting with a letter or digit"
	NameRule      = "1 to 200 letters, digits, '_', '.', ':' or '-', starting with a letter or digit (no '/')"
)

// ValidNamespace reports whether s matches NamespacePattern.
func ValidNamespace(s string) bool {
	if len(s) < 1 || len(s) > 63 || !lowerOrDigit(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !lowerOrDigit(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// ValidName reports whether s matches NamePattern.
func ValidName(s string) bool {
	if len(s) < 1 || len(s) > 200 || !Alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !Alnum(c) && c != '_' && c != '.' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

func lowerOrDigit(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func Alnum(c byte) bool { return lowerOrDigit(c) || 'A' <= c && c <= 'Z' }

// ParseKey checks namespace and name against the patterns of the public API.
// Neither may contain '/', '{' or '}', so "namespace/name" is unambiguous and
// safe to use as a Redis Cluster hash tag.
func ParseKey(namespace, name string) (Key, error) {
	if !ValidNamespace(namespace) {
		return Key{}, fmt.Errorf("%w: a namespace is %s", ErrInvalid, NamespaceRule)
	}
	if !ValidName(name) {
		return Key{}, fmt.Errorf("%w: a name is %s", ErrInvalid, NameRule)
	}
	return Key{Namespace: namespace, Name: name}, nil
}

// String returns "namespace/name".
func (k Key) String() string { return k.Namespace + "/" + k.Name }

// AcquireRequest says how to take a lock.
type AcquireRequest struct {
	// TTL is the lease length; at least 1 ms.
	TTL time.Duration
	// Wait is how long to wait for a held lock; 0 fails at once with ErrHeld,
	// otherwise at least 1 ms.
	Wait time.Duration
	// Subject identifies the caller: at the gateway, the token's issuer and
	// subject as one text (see auth.Identity).
	Subject string
	// Owner is a free-form label shown by Inspect, at most MaxOwnerLen bytes.
	Owner string
	// Mode is Exclusive (the zero value) or Shared.
	Mode Mode
	// MaxHold, when not 0, is a hard cap on the grant: no renewal,
	// re-entry or session keep-alive carries its lease past its
	// acquisition plus MaxHold (Lease.HoldUntil), and at that moment it
	// ends as an expired lease does, with a history event max_hold. At
	// least TTL: a cap below the first lease would cut the grant short
	// before it began.
	MaxHold time.Duration
	// Value is the grant's value, at most MaxValueLen bytes ("" for none):
	// shown by Inspect and the history while the grant holds the lock,
	// changed by its holder with SetValue, gone with the grant. A waiter's
	// value becomes the lock's when the lock is handed to it. Exclusive
	// grants only: a shared hold carries none.
	Value string
	// MinHold keeps the lock from everyone else until the grant's
	// acquisition plus MinHold, even once it is released: a release before
	// then answers as ever, and the lock stays unavailable (ErrHeld, its
	// RetryAfter up to then; Inspect's NotHeldError says until when) and
	// goes to the first waiter then. 0 for none. Exclusive grants only.
	// A lease that ends unreleased frees the lock at its end, as ever.
	MinHold time.Duration
	// Priority is a waiter's priority, 0 (the default) to MaxPriority:
	// a higher one is served first, in arrival order within one priority,
	// and every aging period of the backend's (PriorityAging) that a
	// waiter waits raises it one level against those who came later, so
	// that none waits forever. A waiter of priority p ranks as one of
	// priority 0 that came p aging periods earlier. Only a waiting acquire
	// (Wait > 0, of a lock or a permit) or a ticket has a place to rank.
	Priority int
	// OwnerToken is the owner token to grant under: "" for a new one; a
	// session's grants have tokens derived from the session's.
	OwnerToken string
	// Keep returns a grant made as the caller left (its context done)
	// instead of releasing it: set for a call with an idempotency key,
	// whose record leads the caller's retry to the grant.
	Keep bool
	// Handed, for a ticket (OpenTicket) that is queued, is called once, in
	// a goroutine of its own, when the lock is handed to the ticket: its
	// grant now waits for a poll to pick it up. A hint for telling the
	// caller to poll, never a grant: it may not come (on Redis it comes to
	// the gateway that opened the ticket, from a message a lost connection
	// loses, and not once a poll through another gateway moved the
	// ticket's hand-off message there), and no call comes once the ticket's
	// wait is over. Not called when OpenTicket answers a grant. Nil for
	// none.
	Handed func(TicketHanded)
}

// TicketHanded tells AcquireRequest.Handed which ticket was handed the
// lock, and until when its grant waits to be picked up.
type TicketHanded struct {
	ID       string
	PickUpBy time.Time
}

// Mode is how a grant holds a lock: alone, or beside other shared grants.
type Mode uint8

const (
	// Exclusive grants exclude every other grant of the lock.
	Exclusive Mode = iota
	// Shared grants coexist with each other (many readers), and exclude an
	// exclusive one (one writer). Waiters still queue in arrival order: a
	// shared request behind a waiting exclusive one waits, so writers do
	// not starve, and the shared requests at the head of the queue are
	// granted together.
	Shared
)

func (m Mode) String() string {
	if m == Shared {
		return "shared"
	}
	return "exclusive"
}

// MaxPriority is the highest AcquireRequest.Priority.
const MaxPriority = 9

// DefaultPriorityAging is how long a waiter waits for each level its
// priority rises (AcquireRequest.Priority), unless the backend's options
// say otherwise.
const DefaultPriorityAging = 30 * time.Second

// MaxOwnerLen is the longest owner label Acquire accepts.
const MaxOwnerLen = 128

// MaxValueLen is the longest value a grant carries (see
// AcquireRequest.Value): enough for an address or a small document, and
// small enough that a lock's record stays a few hundred bytes to a KiB.
const MaxValueLen = 1024

// Durations reach Redis in whole milliseconds: a TTL under 1 ms would
// become 0, which Redis refuses for a lease and which renew reads as "the
// original TTL". So the engine refuses them rather than round them.
func (r AcquireRequest) Validate() error {
	switch {
	case r.TTL < time.Millisecond:
		return fmt.Errorf("%w: ttl must be at least 1ms", ErrInvalid)
	case r.Wait < 0:
		return fmt.Errorf("%w: wait must not be negative", ErrInvalid)
	case r.Wait > 0 && r.Wait < time.Millisecond:
		return fmt.Errorf("%w: wait must be 0 or at least 1ms", ErrInvalid)
	case len(r.Owner) > MaxOwnerLen:
		return fmt.Errorf("%w: owner label longer than %d bytes", ErrInvalid, MaxOwnerLen)
	case r.Mode > Shared:
		return fmt.Errorf("%w: unknown mode %d", ErrInvalid, r.Mode)
	case r.MaxHold < 0:
		return fmt.Errorf("%w: max_hold must not be negative", ErrInvalid)
	case r.MaxHold > 0 && r.MaxHold < r.TTL:
		return fmt.Errorf("%w: max_hold (%s) must be at least the ttl (%s)", ErrInvalid, r.MaxHold, r.TTL)
	case r.Priority < 0 || r.Priority > MaxPriority:
		return fmt.Errorf("%w: got %d", ErrInvalidPriority, r.Priority)
	case r.MinHold < 0:
		return fmt.Errorf("%w: min hold must not be negative", ErrInvalid)
	case r.MinHold > 0 && r.Mode == Shared:
		return fmt.Errorf("%w: min hold applies to exclusive holds only", ErrInvalid)
	case r.MinHold > 0 && r.MaxHold > 0 && r.MinHold > r.MaxHold:
		return fmt.Errorf("%w: min hold (%s) must not be longer than max_hold (%s)", ErrInvalid, r.MinHold, r.MaxHold)
	}
	return ValidateValue(r.Value, r.Mode)
}

// ValidateValue checks a grant's value (see AcquireRequest.Value).
func ValidateValue(v string, m Mode) error {
	switch {
	case len(v) > MaxValueLen:
		return fmt.Errorf("%w: value longer than %d bytes", ErrInvalid, MaxValueLen)
	case v != "" && m == Shared:
		return ErrSharedValue
	}
	return nil
}

// ErrSharedValue refuses a value for a shared hold: of many holders, none
// would be the one whose value the lock shows.
var ErrSharedValue = fmt.Errorf("%w: a shared hold carries no value; values belong to exclusive grants", ErrInvalid)

// ValidateRenewTTL checks the TTL of a renew: 0 (the TTL the grant was
// acquired with) or at least 1 ms.
func ValidateRenewTTL(ttl time.Duration) error {
	if ttl < 0 || (ttl > 0 && ttl < time.Millisecond) {
		return fmt.Errorf("%w: ttl must be 0 or at least 1ms", ErrInvalid)
	}
	return nil
}

// Lease is the part of a grant that renewals change.
type Lease struct {
	// FencingToken strictly increases with every acquisition of the lock.
	FencingToken int64
	// TTL is what remained of the lease when the backend answered.
	TTL time.Duration
	// ExpiresAt is the call's start time plus TTL: never later than the
	// backend's own expiry, so a caller that trusts it stops early, not late.
	ExpiresAt time.Time
	// Mode is how the grant holds the lock, as Renew found it (a signed
	// renewal says it). Unset elsewhere, and for a permit.
	Mode Mode
	// HoldUntil is when the grant's hard cap (AcquireRequest.MaxHold)
	// ends it, counted as ExpiresAt is: never later than the backend's.
	// No lease passes it. Zero for a grant without a cap.
	HoldUntil time.Time
}

// WithinHold is l with its lease cut to its hold_until, when it states
// one that ends first: the backend reads the two from different clocks
// (Redis's PTTL counts from when the script began, its TIME from when the
// script read it), and an answer never states a lease past the cap.
func (l Lease) WithinHold() Lease {
	if !l.HoldUntil.IsZero() && l.ExpiresAt.After(l.HoldUntil) {
		l.TTL -= l.ExpiresAt.Sub(l.HoldUntil)
		l.ExpiresAt = l.HoldUntil
	}
	return l
}

// Grant is a successful acquisition.
type Grant struct {
	Lease
	// Token is the owner token: the only way to release or renew the grant.
	Token string
	// HandoffDelay is set when the lock was handed over from a queue: at
	// most how long passed between the hand-off and Acquire returning.
	HandoffDelay time.Duration
	// Holds is how many times the holder holds the lock: 1 for a new grant,
	// more after Reenter.
	Holds int
	// Hold names the hold a Reenter took, for ReleaseHold; empty for an
	// acquire's grant, whose hold is BaseHold.
	Hold string
	// Replayed is set when the grant was made by an earlier call with the
	// same idempotency key (see Idempotent).
	Replayed bool
}

// Released is what a release did.
type Released struct {
	// Holds is how many holds of the grant are left: 0 once it has ended,
	// and always 0 for a permit.
	Holds int
	// Ended is set when this release ended the grant (its last hold, or a
	// permit). A repeated release, which changes nothing, has it unset.
	Ended bool
	// Held is how long the grant was held, from the grant to this release;
	// 0 unless Ended. The embedded backend counts it on its clock; Redis's
	// counts from the grant's time on Redis's clock to the reply on the
	// gateway's, so a skew between the two clocks moves it.
	Held time.Duration
}

// EndedAfter is a release that ended a grant held for held. Clocks can
// step back; a hold is never shorter than nothing.
func EndedAfter(held time.Duration) Released {
	return Released{Ended: true, Held: max(held, 0)}
}

// Info describes the holders of a lock. Its own Lease, Subject, Owner,
// AcquiredAt and Holds describe the exclusive holder, or, when the lock is
// held shared, the shared holder whose lease ends last: its TTL is how long
// the lock stays held at most, unless renewed.
type Info struct {
	Lease
	Subject    string
	Owner      string
	AcquiredAt time.Time
	// Mode is how the lock is held.
	Mode Mode
	// Holders are the live grants, the soonest lease to end first: one
	// when the lock is held exclusively. Of a lock held shared by more
	// than MaxHoldersShown, they are the MaxHoldersShown whose leases end
	// last.
	Holders []Holder
	// HoldersTotal counts the live grants, in Holders or not.
	HoldersTotal int
	// Waiters is how many callers wait in the lock's queue. The Redis
	// backend counts a waiter whose gateway died until a hand-off drops it.
	Waiters int
	// QueuePriorities are the priorities the waiters asked for
	// (AcquireRequest.Priority), in the order they are served, at most
	// MaxQueueShown of them; nil when nobody waits. Inspect and Watch set
	// it; List leaves it nil.
	QueuePriorities []int
	// Holds is how many times the holder holds the lock (see Reenter).
	Holds int
	// HoldIDs names those holds (see Grant.Hold).
	HoldIDs []string
	// Value is the exclusive grant's value ("" for none, and when held
	// shared).
	Value string
	// Index is the lock's index (see Watcher) in the state described, as
	// Watch with an index below 0 reports it: a watch from it returns at
	// the next change. Inspect sets it (0 when the backend keeps no
	// history); List leaves it 0.
	Index int64
}

// Valuer is what a backend offers for the values of grants (see
// AcquireRequest.Value).
type Valuer interface {
	// SetValue makes value ("" for none) the value of the exclusive
	// grant token holds, and returns its fencing token. The lease stays
	// as it is. A token that does not hold the lock gets ErrNotHolder, a
	// shared hold's token, or a value longer than MaxValueLen, ErrInvalid;
	// both change nothing.
	SetValue(ctx context.Context, key Key, token, value string) (fence int64, err error)
}

// DefaultMaxSharedHolders is how many shared holders one lock may have at
// once, unless the backend's options say otherwise (MaxSharedHolders).
// Past it, a shared request waits for one to leave, or is refused with a
// HeldError that says so.
const DefaultMaxSharedHolders = 1000

// MaxHoldersShown is how many holders Inspect (and List) describe at
// most, so that describing a lock costs a bounded amount of work and
// reply, however many share it.
const MaxHoldersShown = 100

// MaxQueueShown is how many waiters' priorities Inspect shows at most
// (Info.QueuePriorities).
const MaxQueueShown = 100

// Describe fills the Info's own fields from its last holder: the one whose
// lease ends last (see Info).
func (info *Info) Describe() {
	h := info.Holders[len(info.Holders)-1]
	info.Lease, info.Subject, info.Owner, info.AcquiredAt, info.Holds, info.HoldIDs, info.Value = h.Lease, h.Subject, h.Owner, h.AcquiredAt, h.Holds, h.HoldIDs, h.Value
}

// RecordTTL is how long the backends remember a grant after its lease
// ends, or after its release: within it, a repeated release succeeds again
// (changing nothing), and a renew or release that fails says why.
const RecordTTL = 60 * time.Second

// Backend is a Locker that a process owns: it can report whether it can
// reach its store, and must be closed when the process is done with it.
type Backend interface {
	Locker
	Semaphores
	Idempotent
	Lister
	Historian
	Breaker
	Valuer
	Sessions
	LockSets
	Watcher
	Tickets
	// Check reports whether the backend's store answers (for readiness).
	Check(ctx context.Context) error
	// Close releases the backend's connections and background work. It does
	// not release any lock: leases end on their own.
	Close() error
}
