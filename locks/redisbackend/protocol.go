package redisbackend

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"sync/atomic"
	"time"
)

// The values the scripts and the engine agree on: lua/protocol.lua names
// each of them, and TestProtocolAgrees fails when the two differ.
const (
	// A reply's first element, its code.
	codeGranted    = 1  // GRANTED: {code, fence, ttl, now, at, handed, ...}
	codeNotGranted = 0  // NOT_GRANTED: {code, retry, now, rank, arrival}, or {code, why}
	codeGaveBack   = 2  // GAVE_BACK: a leave or a ticket's cancel released the grant
	codeNotFound   = -1 // NOT_FOUND: no such ticket; a semaphore with another limit
	codeOtherMode  = -2 // OTHER_MODE: a re-entry in the other mode
	codeFencedOff  = -3 // FENCED_OFF: a cleanup fenced the call off before it ran
	codeSharedFull = -4 // SHARED_FULL: {code, retry}: the lock has its most shared holders
	// A session script's refusal (lua/lib_session.lua).
	codeSessionEnded   = -5 // SESSION_ENDED
	codeSessionNotYour = -6 // SESSION_NOT_YOURS
	codeSessionFull    = -7 // SESSION_FULL

	// Why a token holds nothing, in {NOT_GRANTED, why}.
	whyUnknown  = 0 // UNKNOWN
	whyReleased = 1 // RELEASED
	whyExpired  = 2 // EXPIRED
	whyBroken   = 3 // BROKEN

	// What idem_begin found about an idempotency key, its reply's first
	// element.
	idemCodeBegun        = 0 // IDEM_BEGUN
	idemCodeLive         = 1 // IDEM_LIVE: {code, sealed token, fence, ttl, holds}
	idemCodeRunning      = 2 // IDEM_RUNNING: {code, pttl}
	idemCodeOtherRequest = 3 // IDEM_OTHER_REQUEST
	idemCodeEnded        = 4 // IDEM_ENDED

	// The words the engine sends, and inspect answers.
	modeShared    = "s"      // MODE_SHARED
	modeExclusive = "x"      // MODE_EXCLUSIVE
	modeResting   = "-"      // MODE_RESTING: {mode, until ms}, a lock a min hold keeps
	ticketNew     = "new"    // TICKET_NEW: queue a ticket
	ticketPoll    = "poll"   // TICKET_POLL: look at it, pick up its grant
	ticketCancel  = "cancel" // TICKET_CANCEL: leave, release its grant
	indexDue      = "index"  // INDEX_DUE: the index's entries a reply asks for (see indexDue)
	watchHint     = "watch"  // WATCH_HINT: the first word of a watch's hint

	// grantFields is the length of a grant's reply: code, fencing token,
	// ttl, now, acquired at, handed.
	grantFields = 6
	// grantedNowFields is the length of the reply of a grant made now in
	// a session's one-step acquire, which cut its lease: code, fencing
	// token, ttl (lua/lib_grant.lua granted_now).
	grantedNowFields = 3
	// queuedFields is the length of a refusal's reply that tells the
	// waiter's place: code, retry, now, rank, arrival (a lock's then
	// says whether a min hold keeps it).
	queuedFields = 5
	// holderFields is the length of each holder in inspect's reply.
	holderFields = 9
	// repeatedMark ends a release's reply that repeats an earlier release:
	// {GRANTED, 0, made at, REPEATED}; releasedAgain is its length.
	repeatedMark  = 0 // REPEATED
	releasedAgain = 4
	// releasedHandingOver is the length of a release's reply that hands
	// the lock in full to a waiter of the caller's gateway: {GRANTED, 0,
	// made at, waiter id, fencing token, ttl, now, acquired at}.
	releasedHandingOver = 8
)

// The call ids of once.lua: a random prefix per process, then a counter,
// so that no two calls anywhere share one (64 random bits tell the
// processes apart) and making one costs no system call.
var (
	callPrefix = func() string {
		b := make([]byte, 8)
		rand.Read(b)
		return base64.RawURLEncoding.EncodeToString(b) + "."
	}()
	callCount atomic.Uint64
)

// newCallID returns a call id no other call has.
func newCallID() string {
	return callPrefix + strconv.FormatUint(callCount.Add(1), 36)
}

// callRecordTTL is how long Redis keeps the reply of a call, for a backend
// whose calls time out after timeout: a delivery of the call later than
// that after the first runs as a new call. Five timeouts cover every
// re-send of a client (each within its call's deadline) and of the
// engine's own clean-ups (each within one timeout after the call).
func callRecordTTL(timeout time.Duration) time.Duration {
	return max(10*time.Second, 5*timeout)
}
