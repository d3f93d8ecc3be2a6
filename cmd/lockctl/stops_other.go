//go:build unix && !linux

package main

// watchStops is Linux only: elsewhere a stopped command is not reported,
// though signals to lockctl still reach it (with SIGCONT) and end it.
func watchStops(*child) {}
