package redisbackend

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/lockgate/lockgate/locks"
)

// TestProtocolAgrees: each value lua/protocol.lua (and lua/holds.lua)
// names has its twin here, equal to it. Renumber a reply code, or change
// how long a record lives, on one side only and this fails.
func TestProtocolAgrees(t *testing.T) {
	want := map[string]string{
		"GRANTED":           strconv.Itoa(codeGranted),
		"NOT_GRANTED":       strconv.Itoa(codeNotGranted),
		"GAVE_BACK":         strconv.Itoa(codeGaveBack),
		"NOT_FOUND":         strconv.Itoa(codeNotFound),
		"OTHER_MODE":        strconv.Itoa(codeOtherMode),
		"FENCED_OFF":        strconv.Itoa(codeFencedOff),
		"SHARED_FULL":       strconv.Itoa(codeSharedFull),
		"SESSION_ENDED":     strconv.Itoa(codeSessionEnded),
		"SESSION_NOT_YOURS": strconv.Itoa(codeSessionNotYour),
		"SESSION_FULL":      strconv.Itoa(codeSessionFull),
		"UNKNOWN":           strconv.Itoa(whyUnknown),
		"RELEASED":          strconv.Itoa(whyReleased),
		"EXPIRED":           strconv.Itoa(whyExpired),
		"BROKEN":            strconv.Itoa(whyBroken),
		"RECORD_MS":         strconv.FormatInt(locks.RecordTTL.Milliseconds(), 10),
		"IDEM_GRACE_MS":     strconv.FormatInt(locks.IdempotencyGrace.Milliseconds(), 10),
		"BASE_HOLD":         strconv.Quote(locks.BaseHold),
		"ALL_HOLDS":         strconv.Quote(allHolds),
		"REPEATED":          strconv.Itoa(repeatedMark),

		"IDEM_BEGUN":         strconv.Itoa(idemCodeBegun),
		"IDEM_LIVE":          strconv.Itoa(idemCodeLive),
		"IDEM_RUNNING":       strconv.Itoa(idemCodeRunning),
		"IDEM_OTHER_REQUEST": strconv.Itoa(idemCodeOtherRequest),
		"IDEM_ENDED":         strconv.Itoa(idemCodeEnded),
		"MODE_SHARED":        strconv.Quote(modeShared),
		"MODE_EXCLUSIVE":     strconv.Quote(modeExclusive),
		"MODE_RESTING":       strconv.Quote(modeResting),
		"TICKET_NEW":         strconv.Quote(ticketNew),
		"TICKET_POLL":        strconv.Quote(ticketPoll),
		"TICKET_CANCEL":      strconv.Quote(ticketCancel),
		"INDEX_DUE":          strconv.Quote(indexDue),
		"WATCH_HINT":         strconv.Quote(watchHint),
	}
	got := map[string]string{}
	// local NAME = value, or local A, B, C = 1, 2, 3 (not a table)
	decl := regexp.MustCompile(`(?m)^local ([A-Z_]+(?:, [A-Z_]+)*) = ([^{\n]+?)\s*(?:--.*)?$`)
	for _, f := range []string{"../../lua/protocol.lua", "../../lua/holds.lua"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllStringSubmatch(string(src), -1) {
			names, values := regexp.MustCompile(`, `).Split(m[1], -1), regexp.MustCompile(`, `).Split(m[2], -1)
			if len(names) != len(values) {
				continue // a table, such as FENCED
			}
			for i, n := range names {
				v := values[i]
				if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' { // a Lua string
					v = strconv.Quote(v[1 : len(v)-1])
				}
				got[n] = v
			}
		}
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: the scripts say %q, the engine %q", name, got[name], w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: named by the scripts, unknown to this test: give it a Go twin", name)
		}
	}
}

// TestEventKindsAgree: lua/lib_history.lua stores an event's kind as its
// number in EVENT_KINDS, which must list EventKinds in the same order (a
// new kind goes at the end of both: the numbers are in Redis already).
func TestEventKindsAgree(t *testing.T) {
	src, err := os.ReadFile("../../lua/lib_history.lua")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)local EVENT_KINDS = \{(.*?)\}`).FindSubmatch(src)
	if m == nil {
		t.Fatal("lib_history.lua has no EVENT_KINDS")
	}
	var got []string
	for _, q := range regexp.MustCompile(`'([a-z_]+)'`).FindAllSubmatch(m[1], -1) {
		got = append(got, string(q[1]))
	}
	if !slices.Equal(got, locks.EventKinds) {
		t.Errorf("lib_history.lua EVENT_KINDS %q, EventKinds %q", got, locks.EventKinds)
	}
}
