package handlers

import (
	"maps"
	"net/http"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestStatusLabel: the shared labels say the status they are for.
func TestStatusLabel(t *testing.T) {
	for _, code := range []int{0, 99, 100, 200, 201, 204, 404, 599, 999, 1000} {
		if got, want := statusLabel(code), strconv.Itoa(code); got != want {
			t.Errorf("statusLabel(%d) = %q, want %q", code, got, want)
		}
	}
}

// TestRequestSeries: a request is counted in the series of its labels,
// whether its counter was looked up before or not, and the counters of
// arbitrary methods are not kept.
func TestRequestSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg)
	for range 3 {
		m.request("/locks/{namespace}/{name}", http.MethodPost, 201).Inc()
		m.request("/locks/{namespace}/{name}", "PURGE", 405).Inc()
	}
	m.request("/locks/{namespace}/{name}", http.MethodPost, 409).Inc()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "lockgate_http_requests_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			labels := ""
			for _, l := range s.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + " "
			}
			got[labels] = s.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"code=201 method=POST route=/locks/{namespace}/{name} ":  3,
		"code=405 method=PURGE route=/locks/{namespace}/{name} ": 3,
		"code=409 method=POST route=/locks/{namespace}/{name} ":  1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("got series %v, want %v", got, want)
	}
	if got, want := len(*m.series.Load()), 2; got != want {
		t.Errorf("got %d series kept, want %d (not the PURGE one)", got, want)
	}
}
