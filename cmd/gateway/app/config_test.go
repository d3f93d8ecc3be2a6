package app

import (
	"io"
	"strings"
	"testing"
)

// TestTicketLivenessFloor: a liveness under 2 s is refused: a long poll
// keeps its ticket alive once a second, and at 100 ms it ran the ticket
// script 30 times a second.
func TestTicketLivenessFloor(t *testing.T) {
	for value, ok := range map[string]bool{"100ms": false, "1999ms": false, "2s": true, "10m": true, "11m": false} {
		_, err := parseConfig(append(append([]string{}, startArgs...), "--ticket-liveness", value), startEnv, io.Discard)
		if ok != (err == nil) || !ok && !strings.Contains(err.Error(), "--ticket-liveness") {
			t.Errorf("--ticket-liveness %s: got %v, want accepted %v", value, err, ok)
		}
	}
}
