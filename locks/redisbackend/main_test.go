package redisbackend_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every backend, and every waiter, must leave no goroutine behind once the
// tests have closed what they opened.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
