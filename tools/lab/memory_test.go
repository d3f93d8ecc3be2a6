package main

import "testing"

func TestGlobEscape(t *testing.T) {
	if got, want := globEscape(`lockgate:{ns/*}[x]?\`), `lockgate:{ns/\*}\[x\]\?\\`; got != want {
		t.Errorf("globEscape = %q, want %q", got, want)
	}
}
