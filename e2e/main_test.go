package e2e

import (
	"testing"

	"go.uber.org/goleak"
)

// No gateway a test started may leave a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
