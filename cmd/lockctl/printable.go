package main

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// printable returns s as it is when every character of it is printable,
// and otherwise escaped as in a Go string literal, without the quotes:
// a subject, owner label or problem detail comes from whoever holds the
// lock or answers at the URL, and an escape sequence (ESC, BEL, a newline,
// U+202E) must not reach the terminal raw, where it can retitle the window,
// clear the screen or forge a line of lockctl's own.
func printable(s string) string {
	if utf8.ValidString(s) {
		clean := true
		for _, r := range s {
			if !unicode.IsPrint(r) {
				clean = false
				break
			}
		}
		if clean {
			return s
		}
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}
