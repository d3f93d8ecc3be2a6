package redisbackend

import (
	"testing"
	"time"

	"github.com/lockgate/lockgate/lua"
)

// TestEveryScriptIsWrapped: the engine has a script of its own for every
// script of package lua, with the flags package lua gives it (once.lua's
// arguments, read-only, the replica barrier).
func TestEveryScriptIsWrapped(t *testing.T) {
	t.Parallel()
	for _, s := range lua.Scripts() {
		w, ok := wrapped[s.Name]
		if !ok {
			t.Errorf("%s: no script of the engine runs it", s.Name)
			continue
		}
		if w.writes != s.Writes || w.once != s.Once || w.acked != s.Acked {
			t.Errorf("%s: got writes %t once %t acked %t, want %t %t %t", s.Name, w.writes, w.once, w.acked, s.Writes, s.Once, s.Acked)
		}
	}
	if len(wrapped) != len(lua.Scripts()) {
		t.Errorf("got %d scripts wrapped, want %d", len(wrapped), len(lua.Scripts()))
	}
}

// TestHeldSince: a release's answer is when the grant was made, and the
// gateway counts the time held from it; an unknown time is nothing held,
// and an older gateway's record, a time held, is taken as it is.
func TestHeldSince(t *testing.T) {
	if got := heldSince(0); got != 0 {
		t.Errorf("heldSince(0) = %v, want 0", got)
	}
	if got := heldSince(1500); got != 1500*time.Millisecond {
		t.Errorf("heldSince(1500), an older gateway's record = %v, want 1.5s", got)
	}
	at := time.Now().Add(-2 * time.Second).UnixMilli()
	if got := heldSince(at); got < 2*time.Second || got > time.Minute {
		t.Errorf("heldSince(2 s ago) = %v, want 2 s or a little more", got)
	}
}
