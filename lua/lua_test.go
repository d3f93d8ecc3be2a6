package lua_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockgate/lockgate/internal/redistest"
	"github.com/lockgate/lockgate/lua"
)

// TestScriptsLoad compiles every script in a real Redis, and checks that
// SCRIPT LOAD gives the SHA that EVALSHA will ask for.
func TestScriptsLoad(t *testing.T) {
	c := redistest.Start(t).Client(t)
	for _, s := range lua.Scripts() {
		script := redis.NewScript(s.Source)
		sha, err := script.Load(t.Context(), c).Result()
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if sha != script.Hash() {
			t.Errorf("%s: Redis says sha %s, go-redis %s", s.Name, sha, script.Hash())
		}
		if got, ok := lua.Named(s.Name); !ok || got != s {
			t.Errorf("%s: Named finds %v, %v", s.Name, got.Name, ok)
		}
	}
}

// TestScriptsStateTheirContract: each script opens by saying what it takes
// and what it returns, since its callers are in another language.
func TestScriptsStateTheirContract(t *testing.T) {
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) != 49 {
		t.Fatalf("got scripts and libraries %v (%v), want 49", files, err)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		header, _, _ := strings.Cut(string(src), "\n\n")
		header = strings.ReplaceAll(header, "\n-- ", " ") // as one line
		want := []string{"KEYS[1", "Returns"}
		switch {
		case f == "lib_keys.lua": // the one description of a lock's keys
			want = []string{"K.lock", "K.fence", "K.queue", "K.alive", "K.waiters", "K.readers", "K.delay",
				"K.history", "K.held", "K.record"}
		case strings.HasPrefix(f, "lib_"): // the others point to it
			want = []string{"lib_keys.lua", "not a script on its own"}
		case f == "semlib.lua":
			want = []string{"S.holders", "S.leases"}
		case f == "idem_lib.lua":
			want = []string{"R.record", "R.lock", "R.holders"}
		}
		for _, want := range want {
			if !strings.Contains(header, want) {
				t.Errorf("%s: header does not state %s", f, want)
			}
		}
	}
}
