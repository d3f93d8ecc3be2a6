package lua_test

import (
	"os"
	"path/filepath"
	"slices"
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

// TestFunctionsLoad loads every script's function library in a real
// Redis, which compiles it, and checks that it defines the function the
// engine will call, with the flags of a script that does not write.
func TestFunctionsLoad(t *testing.T) {
	c := redistest.Start(t).Client(t)
	for _, s := range lua.Scripts() {
		lib, err := c.FunctionLoad(t.Context(), s.Library).Result()
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if lib != s.Function {
			t.Errorf("%s: Redis loaded library %s, want %s", s.Name, lib, s.Function)
		}
		libs, err := c.FunctionList(t.Context(), redis.FunctionListQuery{LibraryNamePattern: s.Function}).Result()
		if err != nil || len(libs) != 1 || len(libs[0].Functions) != 1 || libs[0].Functions[0].Name != s.Function {
			t.Fatalf("%s: FUNCTION LIST says %+v, %v; want one function %s", s.Name, libs, err, s.Function)
		}
		if ro := slices.Contains(libs[0].Functions[0].Flags, "no-writes"); ro == s.Writes {
			t.Errorf("%s: flags %v, writes %t", s.Name, libs[0].Functions[0].Flags, s.Writes)
		}
	}
}

// TestScriptsStateTheirContract: each script opens by saying what it takes
// and what it returns, since its callers are in another language.
func TestScriptsStateTheirContract(t *testing.T) {
	files, err := filepath.Glob("*.lua")
	if err != nil || len(files) != 55 {
		t.Fatalf("got scripts and libraries %v (%v), want 55", files, err)
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
				"K.record"}
		case strings.HasPrefix(f, "lib_"), f == "prios.lua": // the others point to it
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
