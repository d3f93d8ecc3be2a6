package handlers

import "testing"

// TestStatusLabel: the shared labels say the status they are for.
func TestStatusLabel(t *testing.T) {
	for _, code := range []int{0, 99, 100, 200, 201, 204, 404, 599, 999, 1000} {
		if got, want := statusLabel(code), itoa(code); got != want {
			t.Errorf("statusLabel(%d) = %q, want %q", code, got, want)
		}
	}
}
