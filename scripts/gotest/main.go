// Command gotest runs `go test -json` with the arguments it is given and
// prints what `go test` prints without -v: each package's ok or FAIL line
// as it ends, and the whole output of a test that failed. A suite whose
// packages run for minutes says meanwhile what it is doing: each top-level
// test that ran a while, as it passes, each skip with its reason, and after
// a quiet spell, the tests still running. It exits as go test did.
//
//	go run ./scripts/gotest [-C dir] [-failed file] [-started file] [go test flags] [packages]
//
// -C runs go test in dir (go -C dir test ...); -failed appends the FAIL line
// of each package that failed to file, for a summary after several runs;
// -started creates file when the first test binary starts, its build done
// (what else builds from the same packages can start then, and find them
// in the build cache).
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

func main() {
	o, args := ownFlags(os.Args[1:])
	os.Exit(run(o, args))
}

// options are gotest's own flags.
type options struct {
	dir, failed, started string
}

// ownFlags takes -C, -failed and -started, with their values, from the
// front of args; the rest are go test's.
func ownFlags(args []string) (o options, rest []string) {
	for len(args) >= 2 {
		switch args[0] {
		case "-C":
			o.dir = args[1]
		case "-failed":
			o.failed = args[1]
		case "-started":
			o.started = args[1]
		default:
			return o, args
		}
		args = args[2:]
	}
	return o, args
}

// The progress it prints: a passed top-level test that took slow or more,
// and the running tests after quiet without a line.
const (
	slow  = 10 * time.Second
	quiet = 30 * time.Second
)

func run(o options, args []string) int {
	var goArgs []string
	if o.dir != "" {
		goArgs = append(goArgs, "-C", o.dir)
	}
	goArgs = append(goArgs, "test", "-json")
	goArgs = append(goArgs, args...)
	cmd := exec.Command(cmp.Or(os.Getenv("GO"), "go"), goArgs...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		return 2
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "gotest:", err)
		return 2
	}

	p := newPrinter(os.Stdout, time.Now)
	p.module = modulePath(filepath.Join(o.dir, "go.mod"))
	if o.started != "" {
		p.started = func() {
			if err := os.WriteFile(o.started, nil, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "gotest:", err)
			}
		}
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case l, ok := <-lines:
			if !ok {
				done = true
				break
			}
			p.line(l)
		case <-tick.C:
			p.tick()
		}
	}

	code := 0
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			fmt.Fprintln(os.Stderr, "gotest:", err)
			return 2
		}
		code = exit.ExitCode()
	}
	fails := p.failedPackages
	if code != 0 && len(fails) == 0 {
		// A failure no package owns: a flag go test refused, a package
		// that does not exist.
		fails = []string{fmt.Sprintf("FAIL\tgo %s\t(exit status %d)", strings.Join(goArgs, " "), code)}
	}
	if code == 0 && len(fails) > 0 {
		code = 1
	}
	if o.failed != "" && len(fails) > 0 {
		f, err := os.OpenFile(o.failed, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = fmt.Fprintln(f, strings.Join(fails, "\n"))
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "gotest:", err)
		}
	}
	return code
}

// modulePath is the module path that file (a go.mod) declares, or "".
func modulePath(file string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	for l := range strings.Lines(string(data)) {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	return ""
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// printer turns go test -json's events into go test's own lines and the
// progress between them.
type printer struct {
	// module, when set, is left out of the package paths in progress
	// lines (never in go test's own).
	module string
	w      io.Writer
	now    func() time.Time
	start  time.Time
	last   time.Time // when it last printed a line
	// running are the top-level tests running, by package and name, with
	// the time they started; output is every line each test printed so
	// far (subtests under their own names), order the tests of a tree in
	// the order they started.
	running map[testID]time.Time
	output  map[testID][]string
	order   map[testID][]string
	// failedPackages are the FAIL lines of the packages that failed.
	failedPackages []string
	// started, when set, is called once, at the first event of a test
	// binary that runs.
	started func()
}

type testID struct{ pkg, test string }

func newPrinter(w io.Writer, now func() time.Time) *printer {
	return &printer{w: w, now: now, start: now(), last: now(),
		running: make(map[testID]time.Time), output: make(map[testID][]string), order: make(map[testID][]string)}
}

// short is pkg's path within the module, for progress lines.
func (p *printer) short(pkg string) string {
	if p.module == "" {
		return pkg
	}
	if pkg == p.module {
		return "."
	}
	if rest, ok := strings.CutPrefix(pkg, p.module+"/"); ok {
		return rest
	}
	return pkg
}

func (p *printer) print(s string) {
	io.WriteString(p.w, s)
	p.last = p.now()
}

// line takes one line of go test -json's output.
func (p *printer) line(l string) {
	var e event
	if !strings.HasPrefix(l, "{") || json.Unmarshal([]byte(l), &e) != nil {
		p.print(l + "\n") // not an event: go test's own words
		return
	}
	if p.started != nil && (e.Action == "start" || e.Action == "run") {
		p.started()
		p.started = nil
	}
	switch {
	case e.Action == "build-output":
		p.print(e.Output)
	case e.Test == "":
		p.packageEvent(e)
	default:
		p.testEvent(e)
	}
}

func (p *printer) packageEvent(e event) {
	switch e.Action {
	case "output":
		if e.Output == "PASS\n" { // go test without -v leaves it out
			return
		}
		if strings.HasPrefix(e.Output, "FAIL\t") {
			p.failedPackages = append(p.failedPackages, strings.TrimSuffix(e.Output, "\n"))
		}
		p.print(e.Output)
	case "fail":
		// A package that died (a panic, a timeout) leaves its running
		// tests without an end: show what they printed.
		for id := range p.running {
			if id.pkg == e.Package {
				p.print(fmt.Sprintf("--- still running when %s ended: %s\n", e.Package, id.test))
				p.flush(id)
			}
		}
	}
}

func (p *printer) testEvent(e event) {
	top, _, _ := strings.Cut(e.Test, "/")
	id := testID{e.Package, top}
	switch e.Action {
	case "run":
		if e.Test == top {
			p.running[id] = p.now()
		}
		p.order[id] = append(p.order[id], e.Test)
	case "output":
		switch {
		case strings.HasPrefix(e.Output, "=== RUN"), strings.HasPrefix(e.Output, "=== PAUSE"), strings.HasPrefix(e.Output, "=== CONT"):
			return
		}
		sub := testID{e.Package, e.Test}
		p.output[sub] = append(p.output[sub], e.Output)
	case "skip":
		p.print(fmt.Sprintf("    skip %s %s: %s\n", p.short(e.Package), e.Test, p.skipReason(testID{e.Package, e.Test})))
		if e.Test == top {
			p.forget(id)
		} else {
			delete(p.output, testID{e.Package, e.Test})
		}
	case "pass":
		if e.Test != top {
			// A failed test shows what its failed subtests said, as go
			// test does without -v.
			delete(p.output, testID{e.Package, e.Test})
			return
		}
		if d := time.Duration(e.Elapsed * float64(time.Second)); d >= slow {
			p.print(fmt.Sprintf("    pass %s %s (%s)\n", p.short(e.Package), e.Test, d.Round(100*time.Millisecond)))
		}
		p.forget(id)
	case "fail":
		if e.Test == top {
			p.flush(id)
		}
	}
}

// skipReason is what the test said as it skipped: its last line before
// the --- SKIP line.
func (p *printer) skipReason(id testID) string {
	out := p.output[id]
	for i := len(out) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(out[i]); l != "" && !strings.HasPrefix(l, "--- SKIP") {
			return l
		}
	}
	return "no reason given"
}

// flush prints everything the tree of top-level test id printed, test by
// test, and forgets it.
func (p *printer) flush(id testID) {
	var b strings.Builder
	for _, name := range p.order[id] {
		for _, l := range p.output[testID{id.pkg, name}] {
			b.WriteString(l)
		}
	}
	if b.Len() > 0 {
		p.print(b.String())
	}
	p.forget(id)
}

func (p *printer) forget(id testID) {
	for _, name := range p.order[id] {
		delete(p.output, testID{id.pkg, name})
	}
	delete(p.order, id)
	delete(p.running, id)
}

// tick prints the tests still running when nothing was printed for quiet.
func (p *printer) tick() {
	now := p.now()
	if now.Sub(p.last) < quiet {
		return
	}
	if len(p.running) == 0 {
		p.print(fmt.Sprintf("    building test binaries (%s so far) ...\n", now.Sub(p.start).Round(time.Second)))
		return
	}
	ids := make([]testID, 0, len(p.running))
	for id := range p.running {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b testID) int { return p.running[a].Compare(p.running[b]) })
	var names []string
	for _, id := range ids[:min(len(ids), 3)] {
		names = append(names, fmt.Sprintf("%s %s (%s)", p.short(id.pkg), id.test, now.Sub(p.running[id]).Round(time.Second)))
	}
	more := ""
	if len(ids) > 3 {
		more = fmt.Sprintf(" and %d more", len(ids)-3)
	}
	p.print(fmt.Sprintf("    running %s%s\n", strings.Join(names, ", "), more))
}
