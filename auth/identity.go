package auth

import "strings"

// Identity is who a caller is: a subject is only unique within its issuer
// (OIDC Core 2: "sub" is "locally unique ... within the Issuer"), so two
// providers may each have a "deployer", and they are two callers. Rate
// buckets, waiter caps, idempotency records and a lock's holders and
// history all know a caller by its Identity.
type Identity struct {
	// Issuer is the token's iss, "" when it has none (tokens signed with
	// the gateway's own secret or keys need not carry one).
	Issuer string
	// Subject is the token's sub.
	Subject string
}

// String is the identity as one text, as the locks record it (a lock's
// subject, its history's): the subject alone for a token without iss,
// else issuer#subject, the form Kubernetes gives OIDC users. An issuer
// never holds '#' (an OIDC issuer URL has no fragment, and the gateway
// refuses tokens whose iss has one), so the text names one identity; a
// subject without issuer that holds '#' is written with the empty issuer,
// "#" first, so that it cannot pass for another issuer's.
func (id Identity) String() string {
	if id.Issuer == "" && !strings.Contains(id.Subject, "#") {
		return id.Subject
	}
	return id.Issuer + "#" + id.Subject
}
