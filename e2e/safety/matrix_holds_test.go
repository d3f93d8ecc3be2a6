package safety

import (
	"testing"
	"time"
)

// TestHoldsLeftAfterALostRelease: a release that says more holds are left
// than the grant's calls leave is a finding, unless an earlier release of
// the grant was answered around a failover, which may have lost it
// (releases are not acknowledged by the replicas).
func TestHoldsLeftAfterALostRelease(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(1e12 + ms)) }
	failover := at(1000)
	trusted := func(t time.Time) bool { return t.Before(failover.Add(-2*time.Second)) || t.After(failover) }
	for name, tc := range map[string]struct {
		released time.Time // the first release's answer
		want     int
	}{
		"release long before the failover": {at(-5000), 1},
		"release just before the failover": {at(900), 0},
	} {
		t.Run(name, func(t *testing.T) {
			g := &grantRec{lock: "l", fence: 1, holdReleases: []time.Time{tc.released},
				holdsWrong: []string{"l: grant 1 (reentrant): release 2 of 2 answered 1 holds left, want 0"}}
			h := &history{grants: []*grantRec{g}}
			if got := len(h.matrixFindings(1, trusted)); got != tc.want {
				t.Fatalf("got %d findings, want %d", got, tc.want)
			}
		})
	}
}
