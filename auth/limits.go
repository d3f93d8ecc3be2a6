package auth

// Limits are one subject's share of one gateway. A zero field sets no
// limit of its own (see ratelimit.SubjectLimiter for how policy rules and
// the gateway's settings combine).
type Limits struct {
	// Rate is how many requests per second the subject's token bucket
	// refills with. 0: no rate limit.
	Rate float64
	// Burst is the bucket's size: how many requests the subject may send
	// at once after a pause. 0: Rate rounded up, at least 1.
	Burst int
	// MaxWaiters bounds the subject's acquirers waiting (wait_ms) at once
	// on this gateway, locks and semaphores together, tickets too (the
	// handlers count them). 0: no cap.
	MaxWaiters int
}
