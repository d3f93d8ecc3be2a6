package locks

import (
	"fmt"
	"strconv"
)

// ReplicaError says that fewer Redis replicas than the backend requires
// (RedisOptions.MinReplicas) acknowledged the writes of a grant or a renew
// within RedisOptions.ReplicaTimeout. It comes wrapped with ErrUnavailable:
// a grant was released again; a renewed lease is longer on the primary but
// perhaps not on the replicas.
type ReplicaError struct {
	Acked, Want int
	// Renew is set for a renew, whose lease may or may not be extended.
	Renew bool
	// Err is why the acknowledgements were not counted (a WAIT that timed
	// out on the client side, a broken connection), if that was the cause.
	Err error
}

func (e *ReplicaError) Error() string {
	s := fmt.Sprintf("%d of %d replicas acknowledged", e.Acked, e.Want)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *ReplicaError) Unwrap() error { return e.Err }

// Detail words the error for the caller.
func (e *ReplicaError) Detail() string {
	acked := strconv.Itoa(e.Acked) + " of the " + strconv.Itoa(e.Want) + " Redis replicas this gateway requires acknowledged it"
	if e.Err != nil {
		acked = "the gateway could not count the acknowledgements of the Redis replicas it requires"
	}
	if e.Renew {
		return "the replicas did not acknowledge the renewed lease (" + acked + "): it is extended on the Redis primary, " +
			"and may or may not be on the replicas, so a failover now could bring back the old lease; renew again"
	}
	return "the replicas did not acknowledge the grant (" + acked + "); it was released and nothing is held: retry"
}

// renewed marks a ReplicaError as a renew's.
func renewed(err error) error {
	if re, ok := err.(*ReplicaError); ok {
		c := *re
		c.Renew = true
		return &c
	}
	return err
}
