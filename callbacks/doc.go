// Package callbacks tells a ticket's caller, by an HTTP POST to a URL it
// named, that the lock was handed to its ticket: a signed notification
// (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature)
// that names the ticket, never its token, retried with backoff until the
// grant's pick-up time ends. Each ticket's notifications are signed with a
// secret of its own (Secret.ForTicket), its caller's alone.
//
// A notification is a hint and grants nothing: the grant is only ever
// the ticket's poll's, with the ticket token. So what a callback may
// reach matters more than whether it arrives: only URLs on the
// operator's allow-list are accepted (AllowList), redirects are not
// followed, and the address each connection goes to is checked when it
// is made (after DNS), so that a name that resolves to a loopback,
// link-local or private address cannot reach it unless a pattern names
// that address itself.
package callbacks
