// Package embedded is the embedded backend of package locks: locks that
// live in this process only, for development and for a single gateway. It
// keeps the promises of the Redis backend (it passes the same conformance
// suite, locks/locktest), but cannot share locks between processes, and
// they do not outlive the process.
package embedded
