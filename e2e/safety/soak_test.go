package safety

import "os"

// soak is set by make soak (LOCKGATE_SOAK=1): the randomized tests run
// longer and on more seeds than in make test, which keeps each of them,
// every promise still checked, at a size a busy 2-core machine runs in
// minutes.
var soak = os.Getenv("LOCKGATE_SOAK") != ""

// bySoak is test in make test, and soaked in make soak.
func bySoak[T any](test, soaked T) T {
	if soak {
		return soaked
	}
	return test
}
