package locks_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockgate/lockgate/locks"
	"github.com/lockgate/lockgate/locks/embedded"
)

func Example() {
	ctx := context.Background()
	var l locks.Locker = embedded.New(embedded.Options{}) // or redisbackend.New(client, redisbackend.Options{})

	key, err := locks.ParseKey("billing", "invoice-42")
	if err != nil {
		panic(err)
	}
	grant, err := l.Acquire(ctx, key, locks.AcquireRequest{TTL: 30 * time.Second, Subject: "worker-1"})
	if err != nil {
		panic(err)
	}

	// A second caller is refused while the lease lasts.
	_, err = l.Acquire(ctx, key, locks.AcquireRequest{TTL: 30 * time.Second, Subject: "worker-2"})
	fmt.Println("second acquire held:", errors.Is(err, locks.ErrHeld))

	// Work, passing grant.FencingToken to the resource; renew before the
	// lease ends; release when done.
	if _, err := l.Renew(ctx, key, grant.Token, 0); err != nil {
		panic(err)
	}
	rel, err := l.Release(ctx, key, grant.Token)
	fmt.Println("release ended the grant:", rel.Ended, err)
	// Releases are idempotent for a minute (locks.RecordTTL); a renew
	// says why it failed.
	rel, err = l.Release(ctx, key, grant.Token)
	fmt.Println("release again ended it:", rel.Ended, err)
	_, err = l.Renew(ctx, key, grant.Token, 0)
	var nh *locks.NotHolderError
	fmt.Println("renew:", errors.As(err, &nh), nh.Reason)
	// Output:
	// second acquire held: true
	// release ended the grant: true <nil>
	// release again ended it: false <nil>
	// renew: true released
}
