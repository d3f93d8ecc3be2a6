package safety

import (
	"strings"
	"testing"
	"time"
)

// TestMinHoldChecker holds minHoldFindings to its rule: a grant answered
// inside the min hold of an earlier grant released by a 204 is a finding;
// one answered after it, one before a release around a failover, or one
// after a grant that was never released, is not.
func TestMinHoldChecker(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(1e12 + ms)) }
	failover := at(5000)
	trusted := func(t time.Time) bool { return t.Before(failover.Add(-2*time.Second)) || t.After(failover) }
	rest := func(releasedAt int) *grantRec {
		g := &grantRec{lock: "l", fence: 1, prim: "minhold",
			acquired: op{lock: "l", kind: opAcquire, call: at(0), ret: at(10), minHold: 500 * time.Millisecond}}
		if releasedAt >= 0 {
			g.released = &op{kind: opRelease, call: at(releasedAt - 5), ret: at(releasedAt)}
		}
		return g
	}
	next := func(answered int) *grantRec {
		return &grantRec{lock: "l", fence: 2, prim: "exclusive", acquired: op{lock: "l", kind: opAcquire, call: at(answered - 20), ret: at(answered)}}
	}
	for name, tc := range map[string]struct {
		first, second *grantRec
		want          int
	}{
		"answered inside the min hold":      {rest(100), next(300), 1},
		"answered as it ends":               {rest(100), next(499), 0},
		"answered after it":                 {rest(100), next(700), 0},
		"never released (its lease ended)":  {rest(-1), next(300), 0},
		"released around a failover":        {rest(4000), next(300), 0},
		"a grant before it (a lower token)": {rest(100), &grantRec{lock: "l", fence: 0, acquired: op{ret: at(300)}}, 0},
		"another lock":                      {rest(100), &grantRec{lock: "m", fence: 2, acquired: op{ret: at(300)}}, 0},
		"released before the min hold ends": {rest(700), next(800), 0},
	} {
		t.Run(name, func(t *testing.T) {
			h := &history{grants: []*grantRec{tc.first, tc.second}}
			fs := h.minHoldFindings(trusted)
			if len(fs) != tc.want {
				t.Fatalf("got %d findings %v, want %d", len(fs), fs, tc.want)
			}
		})
	}
}

// TestCapChecker holds capChecks to its rule: every answer of a capped
// grant states hold_until, no later than the acquire's answer plus the
// cap, and a lease no later than it.
func TestCapChecker(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(1e12 + ms)) }
	hd := heldGrant{got: op{call: at(0), ret: at(10)}, maxHold: time.Second}
	ptr := func(t time.Time) *time.Time { return &t }
	for name, tc := range map[string]struct {
		g    grant
		want string // in the message; "" for none
	}{
		"within the cap":         {grant{ExpiresAt: at(900), HoldUntil: ptr(at(1005))}, ""},
		"at the cap, to the ms":  {grant{ExpiresAt: at(1011), HoldUntil: ptr(at(1011))}, ""},
		"no hold_until":          {grant{ExpiresAt: at(900)}, "without hold_until"},
		"hold_until past it":     {grant{ExpiresAt: at(900), HoldUntil: ptr(at(1012))}, "past the acquire's answer"},
		"a lease past its until": {grant{ExpiresAt: at(1001), HoldUntil: ptr(at(1000))}, "past its hold_until"},
	} {
		t.Run(name, func(t *testing.T) {
			got := capChecks(hd, "a renewal", op{ret: at(500)}, tc.g)
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSetCapChecker: a capped set's locks are held to the cap from the
// set's 201, each on its own grant; an uncapped set's are not.
func TestSetCapChecker(t *testing.T) {
	at := func(ms int) time.Time { return time.UnixMilli(int64(1e12 + ms)) }
	ptr := func(t time.Time) *time.Time { return &t }
	for name, tc := range map[string]struct {
		maxHold time.Duration
		g       grant
		want    int // findings on lock a
	}{
		"within the cap":          {time.Second, grant{Lock: "a", ExpiresAt: at(900), HoldUntil: ptr(at(1010))}, 0},
		"hold_until past it":      {time.Second, grant{Lock: "a", ExpiresAt: at(900), HoldUntil: ptr(at(1012))}, 1},
		"no hold_until":           {time.Second, grant{Lock: "a", ExpiresAt: at(900)}, 1},
		"uncapped, no hold_until": {0, grant{Lock: "a", ExpiresAt: at(900)}, 0},
		"a lock not of the set":   {time.Second, grant{Lock: "z", ExpiresAt: at(900)}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			rec := &grantRec{lock: "a", fence: 3}
			sg := &setGrant{w: &worker{prim: "lockset"}, names: []string{"a", "b"}, recs: map[string]*grantRec{"a": rec}, maxHold: tc.maxHold, answered: at(10)}
			sg.capped("the set's acquire", at(10), tc.g)
			if len(rec.wrong) != tc.want {
				t.Fatalf("got %d findings %q, want %d", len(rec.wrong), rec.wrong, tc.want)
			}
		})
	}
}
