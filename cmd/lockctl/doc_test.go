package main

import (
	"os"
	"strings"
	"testing"
)

// TestDocListsExitCodes keeps the package doc's table the same as help's.
func TestDocListsExitCodes(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var doc strings.Builder
	for line := range strings.Lines(string(src)) {
		if rest, ok := strings.CutPrefix(line, "//"); ok {
			doc.WriteString(strings.TrimPrefix(rest, " "))
		}
	}
	_, table, _ := strings.Cut(exitCodeTable, "\n") // below "Exit codes:"
	for line := range strings.Lines(table) {
		if !strings.Contains(doc.String(), strings.TrimSpace(line)) {
			t.Errorf("doc.go lacks the exit code line %q", strings.TrimSpace(line))
		}
	}
}
