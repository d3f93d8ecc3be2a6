// Package locks describes lockgate's locks: leases on named locks, with
// owner tokens, fencing tokens and server-side waiting.
//
// A lock is free or held by one grant. Acquire returns the grant's owner
// token, the only way to Release or Renew it, and a fencing token that
// strictly increases with every acquisition of the lock. A lease that runs
// out frees the lock by itself, so a crashed holder blocks others for at
// most its TTL; in return a holder that stalls past its lease (a GC pause, a
// slow call) may still be running while the next holder works, which is why
// a protected resource must reject writes carrying a fencing token lower
// than one it has seen.
//
// It is the contract: keys, requests and grants, the Backend
// interface and what it is made of, and the error vocabulary; with the
// parts every backend shares above its store (sessions over a
// SessionStore, lock sets over a backend's grants, the idempotency
// protocol). It imports no store. Two backends implement Backend, each in a
// package of its own: redisbackend (one Redis, Redis Cluster or Sentinel,
// shared by any number of gateways) and embedded (one process, for
// development and a single gateway). Both pass the conformance suite in
// package locktest, from their own tests; neither imports the other.
//
// # Waiting
//
// Waiters queue in arrival order. A release, or the end of a lease, hands
// the lock straight to the first waiter still alive, so nobody who arrives
// later, or who just released, gets ahead of those waiting. How a backend
// does it is in its own package comment.
//
// The package imports neither net/http nor a logger: callers map its errors
// (ErrHeld, ErrNotHolder, ErrNotHeld, ErrInvalid, ErrUnavailable) to their
// own world.
package locks
