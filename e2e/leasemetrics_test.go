package e2e

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLeaseMetrics: a release that ends a grant is timed in
// lockgate_lock_hold_seconds (a re-entrant hold's release is not), and a
// permit's release in lockgate_permit_hold_seconds; a renew
// or release whose lease ended under it counts in
// lockgate_leases_expired_total, and failed renewals count by reason.
func TestLeaseMetrics(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b backend) {
		gw := startGateway(t, b.args(t)...)
		auth := bearer(token(t, nil))
		url := gw.URL + "/locks/metrics/held"
		start := time.Now()
		g := acquire(t, url, `{"ttl_ms":60000}`)
		var inner grant
		wantJSON(t, call(t, "POST", url, "", with(auth, []string{"Lock-Token", g.Token})...), http.StatusOK, &inner)
		wantJSON(t, call(t, "DELETE", url+"?hold="+inner.Hold, "", with(auth, []string{"Lock-Token", g.Token})...), http.StatusOK, &struct{}{})
		time.Sleep(20 * time.Millisecond) // a hold of some length to measure, not synchronisation
		if r := call(t, "DELETE", url, "", with(auth, []string{"Lock-Token", g.Token})...); r.status != http.StatusNoContent {
			t.Fatalf("release: got %d %s, want 204", r.status, r.body)
		}
		elapsed := time.Since(start).Seconds()

		permitStart := time.Now()
		var p grant
		wantJSON(t, call(t, "POST", gw.URL+"/semaphores/metrics/held", `{"ttl_ms":60000,"limit":2}`, auth...), http.StatusCreated, &p)
		time.Sleep(20 * time.Millisecond) // a hold of some length to measure, not synchronisation
		if r := call(t, "DELETE", gw.URL+"/semaphores/metrics/held", "", with(auth, []string{"Lock-Token", p.Token})...); r.status != http.StatusNoContent {
			t.Fatalf("permit release: got %d %s, want 204", r.status, r.body)
		}
		permitElapsed := time.Since(permitStart).Seconds()

		short := acquire(t, gw.URL+"/locks/metrics/short", `{"ttl_ms":1}`)
		pollUntil(t, "the 1 ms lease to end", func() bool {
			return call(t, "GET", gw.URL+"/locks/metrics/short", "", auth...).status == http.StatusNotFound
		})
		wantProblem(t, call(t, "PUT", gw.URL+"/locks/metrics/short/lease", "", with(auth, []string{"Lock-Token", short.Token})...), http.StatusConflict, "not_holder")
		wantProblem(t, call(t, "DELETE", gw.URL+"/locks/metrics/short", "", with(auth, []string{"Lock-Token", short.Token})...), http.StatusConflict, "not_holder")
		wantProblem(t, call(t, "PUT", gw.URL+"/semaphores/metrics/s/lease", "", with(auth, []string{"Lock-Token", "gone"})...), http.StatusConflict, "not_holder")

		m := string(call(t, "GET", gw.URL+"/metrics", "").body)
		for _, want := range []string{
			"lockgate_lock_hold_seconds_count 1\n",
			"lockgate_permit_hold_seconds_count 1\n",
			`lockgate_leases_expired_total{call="renew",kind="lock"} 1` + "\n",
			`lockgate_leases_expired_total{call="release",kind="lock"} 1` + "\n",
			`lockgate_leases_expired_total{call="renew",kind="semaphore"} 0` + "\n", // "gone" was never granted: not an expiry
			`lockgate_leases_expired_total{call="release",kind="semaphore"} 0` + "\n",
			`lockgate_renewals_failed_total{kind="lock",reason="not_holder"} 1` + "\n",
			`lockgate_renewals_failed_total{kind="semaphore",reason="not_holder"} 1` + "\n",
			`lockgate_renewals_failed_total{kind="lock",reason="unavailable"} 0` + "\n",
		} {
			if !strings.Contains(m, want) {
				t.Errorf("/metrics lacks %s", strings.TrimSpace(want))
			}
		}
		sum := regexp.MustCompile(`(?m)^lockgate_lock_hold_seconds_sum (\S+)$`).FindStringSubmatch(m)
		if sum == nil {
			t.Fatalf("/metrics lacks lockgate_lock_hold_seconds_sum")
		}
		// The backend's clock counts in whole ms: allow 1 ms either side.
		if held, _ := strconv.ParseFloat(sum[1], 64); held < 0.019 || held > elapsed+0.001 {
			t.Errorf("got a hold of %gs, want between 0.019s and %gs", held, elapsed)
		}
		sum = regexp.MustCompile(`(?m)^lockgate_permit_hold_seconds_sum (\S+)$`).FindStringSubmatch(m)
		if sum == nil {
			t.Fatalf("/metrics lacks lockgate_permit_hold_seconds_sum")
		}
		if held, _ := strconv.ParseFloat(sum[1], 64); held < 0.019 || held > permitElapsed+0.001 {
			t.Errorf("got a permit hold of %gs, want between 0.019s and %gs", held, permitElapsed)
		}
	})
}
