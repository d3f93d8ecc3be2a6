package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/lockgate/lockgate/internal/jsonkeys"
)

// Policy grants namespaces to tokens that carry no namespace claim (an
// OIDC provider's, a CI system's, a Kubernetes service account's), by rules
// on their claims. A token that matches no rule is granted nothing.
type Policy struct {
	rules []rule
}

type rule struct {
	match      []condition // sorted by claim
	namespaces []string
	admin      []string      // admin_namespaces: globs of namespaces its tokens administer
	maxTTL     time.Duration // 0: no cap of its own
	maxHold    time.Duration // 0: no cap of its own
	limits     Limits        // zero fields: the gateway's
}

// condition holds when the claim's value matches glob whole; see
// claimMatches for values that are not strings.
type condition struct {
	claim, glob string
}

// Fields of a policy file, matched exactly (encoding/json would take
// "Namespaces" or "NAMESPACES" for "namespaces").
var (
	policyFields = []string{"rules"}
	ruleFields   = []string{"match", "namespaces", "admin_namespaces", "max_ttl", "max_hold", "subject_rate", "subject_burst", "subject_max_waiters"}
)

// ParsePolicy reads a policy file:
//
//	{"rules": [
//	  {"match": {"iss": "https://token.actions.example", "repository": "acme/*"},
//	   "namespaces": ["deploy-*"], "admin_namespaces": ["deploy-staging"], "max_ttl": "10m",
//	   "subject_rate": 5, "subject_burst": 10, "subject_max_waiters": 20}
//	]}
//
// Every condition of a rule's match must hold for the rule to apply: the
// claim named must be a string that the glob ('*' for any run of
// characters) matches whole, or an array with such a string among its
// elements. The namespaces of every rule that applies add up, and so do
// its admin_namespaces (those its tokens administer, within the namespaces
// they are granted: see Claims.Administers); the
// smallest max_ttl among them caps the lease, and the smallest max_hold
// the hard cap on a lock's grant (as the gateway's --max-hold; it is the
// token's, so a cap for some namespaces is a rule that grants those).
// subject_rate (requests per
// second), subject_burst and subject_max_waiters set each matching
// subject's own limits on a gateway, as --subject-rate, --subject-burst
// and --subject-max-waiters do for every other subject (see
// ratelimit.SubjectLimiter); where several matching rules set one, the
// smallest applies. Errors name the rule by its position, from 1.
func ParsePolicy(data []byte) (*Policy, error) {
	if key, dup := jsonkeys.Duplicate(data); dup {
		return nil, fmt.Errorf("key %q appears twice", key)
	}
	if jsonkeys.Trailing(data) {
		return nil, errors.New("data after the policy object")
	}
	top, err := exactObject(data, policyFields)
	if err != nil {
		return nil, err
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(top["rules"], &raws); err != nil || len(raws) == 0 {
		return nil, errors.New(`"rules" must be a non-empty array of rules`)
	}
	p := &Policy{rules: make([]rule, 0, len(raws))}
	for i, raw := range raws {
		r, err := parseRule(raw)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i+1, err)
		}
		p.rules = append(p.rules, r)
	}
	return p, nil
}

func parseRule(data []byte) (rule, error) {
	var r rule
	fields, err := exactObject(data, ruleFields)
	if err != nil {
		return r, err
	}
	match, err := exactObject(fields["match"], nil)
	if err != nil || len(match) == 0 {
		return r, errors.New(`"match" must be an object of claim names and globs, with at least one (to grant every token, say so: {"sub": "*"})`)
	}
	for claim, raw := range match {
		var glob string
		if claim == "" {
			return r, errors.New("match: a claim name is empty")
		}
		if err := json.Unmarshal(raw, &glob); err != nil {
			return r, fmt.Errorf("match %q: want a string (a glob), got %s", claim, shorten(raw))
		}
		r.match = append(r.match, condition{claim: claim, glob: glob})
	}
	sort.Slice(r.match, func(i, j int) bool { return r.match[i].claim < r.match[j].claim })
	if err := json.Unmarshal(fields["namespaces"], &r.namespaces); err != nil || len(r.namespaces) == 0 {
		return r, errors.New(`"namespaces" must be a non-empty array of namespace globs`)
	}
	for _, g := range r.namespaces {
		if !validNamespaceGlob(g) {
			return r, fmt.Errorf("namespace glob %s: want lower-case letters, digits, '_', '-' and '*'", strconv.Quote(g))
		}
	}
	if raw, ok := fields["admin_namespaces"]; ok {
		if err := json.Unmarshal(raw, &r.admin); err != nil {
			return r, errors.New(`"admin_namespaces" must be an array of namespace globs`)
		}
		for _, g := range r.admin {
			if !validNamespaceGlob(g) {
				return r, fmt.Errorf("admin namespace glob %s: want lower-case letters, digits, '_', '-' and '*'", strconv.Quote(g))
			}
		}
	}
	if r.maxTTL, err = ruleDuration(fields, "max_ttl"); err != nil {
		return r, err
	}
	if r.maxHold, err = ruleDuration(fields, "max_hold"); err != nil {
		return r, err
	}
	if raw, ok := fields["subject_rate"]; ok {
		if err := json.Unmarshal(raw, &r.limits.Rate); err != nil || r.limits.Rate <= 0 || r.limits.Rate > maxRuleLimit {
			return r, fmt.Errorf("subject_rate: want requests per second, more than 0 and at most %d, got %s", maxRuleLimit, shorten(raw))
		}
	}
	for _, f := range []struct {
		name string
		dst  *int
	}{{"subject_burst", &r.limits.Burst}, {"subject_max_waiters", &r.limits.MaxWaiters}} {
		name, dst := f.name, f.dst
		if raw, ok := fields[name]; ok {
			if err := json.Unmarshal(raw, dst); err != nil || *dst < 1 || *dst > maxRuleLimit {
				return r, fmt.Errorf("%s: want a whole number from 1 to %d, got %s", name, maxRuleLimit, shorten(raw))
			}
		}
	}
	return r, nil
}

// maxRuleLimit bounds the numbers of a rule's limits, far above any use.
const maxRuleLimit = 1_000_000

// HasLimits reports whether a rule of p sets a subject limit; p may be nil.
func (p *Policy) HasLimits() bool {
	if p == nil {
		return false
	}
	for _, r := range p.rules {
		if r.limits != (Limits{}) {
			return true
		}
	}
	return false
}

// exactObject decodes a JSON object into its members by exact name,
// refusing names outside allowed (nil allows any).
func exactObject(data []byte, allowed []string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) || json.Unmarshal(data, &m) != nil {
		return nil, errors.New("want a JSON object")
	}
	if allowed != nil {
		for k := range m {
			if !slices.Contains(allowed, k) {
				return nil, fmt.Errorf("unknown field %s (want %q)", strconv.Quote(k), allowed)
			}
		}
	}
	return m, nil
}

// validNamespaceGlob: the characters of a namespace
// (^[a-z0-9][a-z0-9_-]{0,62}$) and '*'; a glob with others would never
// match.
func validNamespaceGlob(g string) bool {
	if g == "" || len(g) > 200 {
		return false
	}
	for _, c := range []byte(g) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' && c != '-' && c != '*' {
			return false
		}
	}
	return true
}

func shorten(raw json.RawMessage) string {
	if len(raw) > 40 {
		return string(raw[:40]) + "..."
	}
	return string(raw)
}

// policyGrant is what the rules that match a token grant it.
type policyGrant struct {
	namespaces, admin []string
	maxTTL, maxHold   time.Duration
	limits            Limits
}

// grant adds up what the rules that match claims grant: their namespaces
// and admin namespaces, the smallest max_ttl and max_hold, and the
// smallest limits.
func (p *Policy) grant(claims map[string]json.RawMessage) policyGrant {
	var g policyGrant
	for _, r := range p.rules {
		if !r.matches(claims) {
			continue
		}
		for _, ns := range r.namespaces {
			if !slices.Contains(g.namespaces, ns) {
				g.namespaces = append(g.namespaces, ns)
			}
		}
		for _, ns := range r.admin {
			if !slices.Contains(g.admin, ns) {
				g.admin = append(g.admin, ns)
			}
		}
		if r.maxTTL > 0 && (g.maxTTL == 0 || r.maxTTL < g.maxTTL) {
			g.maxTTL = r.maxTTL
		}
		g.maxHold = smallestSet(g.maxHold, r.maxHold)
		g.limits.Rate = smallestSet(g.limits.Rate, r.limits.Rate)
		g.limits.Burst = smallestSet(g.limits.Burst, r.limits.Burst)
		g.limits.MaxWaiters = smallestSet(g.limits.MaxWaiters, r.limits.MaxWaiters)
	}
	return g
}

// smallestSet is the smaller of a and b, where 0 means unset.
func smallestSet[T int | float64 | time.Duration](a, b T) T {
	switch {
	case a == 0:
		return b
	case b == 0:
		return a
	}
	return min(a, b)
}

func (r rule) matches(claims map[string]json.RawMessage) bool {
	for _, c := range r.match {
		if !claimMatches(claims[c.claim], c.glob) {
			return false
		}
	}
	return true
}

// claimMatches: a string claim matches when glob matches it whole; an
// array claim when one of its string elements does. Numbers, booleans,
// objects, null and a missing claim match nothing: a rule on them never
// applies, rather than applying by a guess at how to compare them.
func claimMatches(raw json.RawMessage, glob string) bool {
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '"':
		var s string
		return json.Unmarshal(raw, &s) == nil && matchNamespace(glob, s)
	case '[':
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return false
		}
		for _, e := range elems {
			var s string
			if len(e) > 0 && e[0] == '"' && json.Unmarshal(e, &s) == nil && matchNamespace(glob, s) {
				return true
			}
		}
	}
	return false
}

// ruleDuration reads a rule's duration field name ("10m", at least 1ms),
// 0 when the rule has none.
func ruleDuration(fields map[string]json.RawMessage, name string) (time.Duration, error) {
	raw, ok := fields[name]
	if !ok {
		return 0, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf(`%s: want a duration such as "10m", got %s`, name, shorten(raw))
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < time.Millisecond {
		return 0, fmt.Errorf(`%s %s: want a duration of at least 1ms, such as "10m"`, name, strconv.Quote(s))
	}
	return d, nil
}
