package safety

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeBinaries()
	if n := len(breaches.errs); n > 0 {
		fmt.Fprintf(os.Stderr, "%d answers broke openapi.yaml; the first: %v\n", n, breaches.errs[0])
		code = 1
	}
	if code == 0 {
		// Every gateway, proxy and client of the suite is stopped by the
		// cleanups of its test: nothing may be left running.
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
