package clients

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// parallel is how many of the package's tests run at once when -parallel
// does not say: go test's default, GOMAXPROCS, is 2 on a 2-core machine,
// and these tests spend most of their time waiting for the programs they
// run (a Python or Node start, a lease, a shell recipe), not computing.
// Each starts its own redis-server and gateway on free loopback ports.
const parallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", fmt.Sprint(parallel))
	}
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// built is the package's one build of the programs the README's reader
// builds (make build): the gateway, lockctl and examples/go/verifygrant.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// startBuild starts building the programs, if no test did yet, and
// returns at once: a test calls it before t.Parallel, so that the build
// runs while tests before it do.
func startBuild() { go buildPrograms() }

func buildPrograms() {
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "lockgate-clients-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/gateway", "./cmd/lockctl", "./examples/go/verifygrant")
		build.Dir = filepath.Join("..", "..")
		if out, err := build.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
}

// programs returns the directory of the built programs (gateway, lockctl,
// verifygrant), building them if no test did yet.
func programs(t *testing.T) string {
	t.Helper()
	buildPrograms()
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}
