// Package loadgen is lockbench's load generator: it drives a lock target
// (a gateway over HTTP, or the lock engine in-process as the floor) with
// concurrent clients in one of four modes (uncontended, contended, on a
// semaphore, shared and exclusive), measures throughput, latency,
// handoffs and fairness, and renders the report as markdown or JSON.
//
// cmd/lockbench runs it against a gateway's URL. The lab in tools/lab, a
// module of its own, imports it to run the same scenarios against the
// gateways, ceilings and etcd it starts, which is why this package is not
// internal to cmd/lockbench.
package loadgen
