// Package safety is lockgate's proof of safety: tests that run real
// gateways against a real redis-server, record what concurrent clients saw,
// and check the history against the promises in docs/SAFETY.md, under
// faults (Redis paused, killed, slowed, cut off; gateways killed; clients
// that hang up), hostile input and resource exhaustion. Scripted scenarios
// hold back hand-off messages, let waiters lapse and promote replicas that
// lost writes; TestRandomFaults mixes delays, cut links and Redis pauses
// from a seed that LOCKGATE_FAULT_SEED replays; TestSentinelFailover kills
// the primary under Redis Sentinel. It holds tests only.
package safety
