package redisbackend

import (
	"testing"

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
