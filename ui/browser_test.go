package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// browser finds a Chromium: Debian's chromium package, which
// scripts/ensure-tools installs when it can, or another build of Chrome.
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium found (chromium, chromium-browser or google-chrome on PATH): install Debian's chromium package, " +
		"as scripts/ensure-tools does when run as root, to run the dashboard's browser test")
	return ""
}

// tab is a page of a headless Chromium, with what it reported: console
// messages and errors, browser log entries (CSP violations among them),
// uncaught exceptions and the URLs it requested.
type tab struct {
	ctx context.Context

	mu       sync.Mutex
	problems []string // errors and warnings of the page and the browser
	requests []string
}

// newBrowser starts a headless Chromium for the test.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser(t)),
		chromedp.Flag("disable-dev-shm-usage", true), // containers have a small /dev/shm
		chromedp.DisableGPU,
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to run as root with its sandbox (CI runs as root).
		opts = append(opts, chromedp.NoSandbox)
	}
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	// The first call starts the browser, which lives as long as the
	// context of that call: it takes no timeout of its own.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// newTab opens a tab of the browser, which starts with empty
// sessionStorage, as a new tab of a person's browser does.
func newTab(t *testing.T, browserCtx context.Context) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browserCtx)
	t.Cleanup(cancel)
	tb := &tab{ctx: ctx}
	err := chromedp.Listen(ctx, func(ev any) {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		switch ev := ev.(type) {
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Level == cdplog.EntryLevelWarning {
				tb.problems = append(tb.problems, fmt.Sprintf("log %s (%s) %s: %s", ev.Entry.Level, ev.Entry.Source, ev.Entry.URL, ev.Entry.Text))
			}
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value))
				}
				tb.problems = append(tb.problems, fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			if d.Exception != nil {
				tb.problems = append(tb.problems, "exception: "+d.Text+" "+d.Exception.Description)
			} else {
				tb.problems = append(tb.problems, "exception: "+d.Text)
			}
		case *network.EventRequestWillBeSent:
			tb.requests = append(tb.requests, ev.Request.URL)
		}
	})
	if err != nil {
		t.Fatalf("listen to the tab: %v", err)
	}
	tb.run(t, "enable the log and network domains", 10*time.Second, chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		if _, err := cdp.Call(ctx, target, cdplog.Enable, cdp.Empty{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, target, network.Enable, network.EnableParams{})
		return err
	}))
	return tb
}

// run runs actions, failing the test if they do not finish within d.
func (tb *tab) run(t *testing.T, what string, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, d)
	defer cancel()
	defer func(start time.Time) { t.Logf("%s: %s", what, time.Since(start).Round(time.Millisecond)) }(time.Now())
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v\nthe page reported: %s", what, err, tb.reported())
	}
}

// value runs one action that returns a value, as run does.
func value[T any](t *testing.T, tb *tab, what string, d time.Duration, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, d)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("%s: %v\nthe page reported: %s", what, err, tb.reported())
	}
	return v
}

func (tb *tab) reported() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.problems) == 0 {
		return "nothing"
	}
	return strings.Join(tb.problems, "\n")
}

func (tb *tab) snapshot() (problems, requests []string) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return append([]string(nil), tb.problems...), append([]string(nil), tb.requests...)
}

// call makes an API call with tok and returns the status and JSON body.
func call(t *testing.T, method, url, tok string, header http.Header, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if len(bytes.TrimSpace(b)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber() // fencing tokens are larger than a float64 holds exactly
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp.StatusCode, m
}

// TestDashboardInChromium drives the dashboard in a real headless
// Chromium against a real gateway: a lock acquired over HTTP appears with
// its holder, owner, fencing token, mode and waiters, its countdown moves,
// its history shows, and it disappears when released; a semaphore named
// shows its permits; a token for another namespace sees none of it; the
// token never shows in the page, a URL or a request to another origin;
// the policy holds (nothing of the page is blocked, an inline script is).
func TestDashboardInChromium(t *testing.T) {
	gw := startGateway(t, "--ui")
	browserCtx := newBrowser(t)
	const (
		// A bound, not a pace: each step polls and ends when it holds,
		// in a second or two; a loaded machine may take longer.
		wait = 30 * time.Second
		row  = `tr[data-lock="ui-lock"]`
	)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	until := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(wait))
	}
	tokA := token(t, "viewer-a", "team-a")
	tokB := token(t, "viewer-b", "team-b")

	a := newTab(t, browserCtx)
	a.run(t, "open the dashboard and paste the token", wait,
		chromedp.Navigate(gw.URL+"/ui/"),
		chromedp.WaitVisible(css(`#token`)),
		chromedp.SendKeys(css(`#token`), tokA),
		chromedp.Click(css(`#use-token`)),
		// The token grants one namespace by name: the page shows it.
		chromedp.WaitVisible(css(`#namespace`)),
		until(`document.getElementById('locks-status').textContent === 'no held lock'`),
	)
	seen := value(t, a, "read who the page says the viewer is", wait, chromedp.Evaluate[[]string](
		`['who', 'grants', 'ns-shown'].map(id => document.getElementById(id).textContent.trim())`))
	if want := []string{"viewer-a", "team-a", "team-a"}; !slices.Equal(seen, want) {
		t.Fatalf("the page says viewer, grants, namespace shown: got %q, want %q", seen, want)
	}

	status, grant := call(t, http.MethodPost, gw.URL+"/locks/team-a/ui-lock", tokA, nil, `{"ttl_ms":60000,"owner":"build-7","value":"10.0.0.7:8080"}`)
	if status != http.StatusCreated {
		t.Fatalf("acquire: got %d, want 201: %v", status, grant)
	}
	a.run(t, "see the lock appear", wait, chromedp.WaitVisible(css(row)))
	cells := value(t, a, "read the lock's row", wait, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('`+row+` td')].map(td => td.textContent)`))
	want := []string{"ui-lock", "viewer-a", "build-7", "10.0.0.7:8080", "≈ N s", fmt.Sprint(grant["fencing_token"]), "exclusive", "0", "History"}
	if len(cells) != len(want) {
		t.Fatalf("the lock's row: got %q, want %q", cells, want)
	}
	for i := range want {
		if i == 4 {
			if !strings.HasPrefix(cells[i], "≈ ") || !strings.HasSuffix(cells[i], " s") {
				t.Errorf("lease left: got %q, want ≈ N s", cells[i])
			}
			continue
		}
		if cells[i] != want[i] {
			t.Errorf("the lock's row, cell %d: got %q, want %q", i, cells[i], want[i])
		}
	}
	a.run(t, "see the countdown move", wait,
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector('%s td.left').textContent !== %q`, row, cells[4]),
			chromedp.WithPollingTimeout(5*time.Second)))

	a.run(t, "show the lock's history", wait,
		chromedp.Click(css(row+` button.history`)),
		chromedp.WaitVisible(css(`#history-events td.event`)))
	events := value(t, a, "read the history", wait, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll('#history-events td.event')].map(td => td.textContent)`))
	if !slices.Equal(events, []string{"acquired"}) {
		t.Errorf("history: got %q, want [acquired]", events)
	}

	if status, _ := call(t, http.MethodPost, gw.URL+"/semaphores/team-a/pool", tokA, nil, `{"limit":3,"ttl_ms":60000,"owner":"worker-1"}`); status != http.StatusCreated {
		t.Fatalf("take a permit: got %d, want 201", status)
	}
	a.run(t, "show a semaphore by name", wait,
		chromedp.SendKeys(css(`#sem-name`), "pool"),
		chromedp.Click(css(`#sem-show`)),
		chromedp.WaitVisible(css(`#sem-holders td`)))
	sem := value(t, a, "read the semaphore", wait, chromedp.Evaluate[[]string](
		`[document.getElementById('sem-summary').textContent, document.querySelector('#sem-holders tr').textContent]`))
	if sem[0] != "pool: 1 of 3 permits held, 0 waiting" || !strings.Contains(sem[1], "worker-1") {
		t.Errorf("semaphore: got %q; want pool: 1 of 3 permits held, 0 waiting, held by worker-1", sem)
	}

	// The token is in the tab's sessionStorage, and nowhere the page shows.
	leaks := value(t, a, "look for the token in the page", wait, chromedp.Evaluate[[]string](fmt.Sprintf(`(() => {
		const tok = %q, found = [];
		if (document.documentElement.outerHTML.includes(tok)) found.push('the page');
		if (document.body.innerText.includes(tok)) found.push('the text');
		if (location.href.includes(tok)) found.push('the URL');
		if (document.getElementById('token').value !== '') found.push('the token field');
		if (document.cookie !== '') found.push('a cookie');
		if (localStorage.length !== 0) found.push('localStorage');
		if (sessionStorage.getItem('lockgate.token') !== tok) found.push('not in sessionStorage');
		return found;
	})()`, tokA)))
	if len(leaks) > 0 {
		t.Errorf("the token: %v", leaks)
	}

	status, _ = call(t, http.MethodDelete, gw.URL+"/locks/team-a/ui-lock", tokA, http.Header{"Lock-Token": {grant["token"].(string)}}, "")
	if status != http.StatusNoContent {
		t.Fatalf("release: got %d, want 204", status)
	}
	a.run(t, "see the lock disappear", wait, chromedp.WaitNotPresent(css(row)))

	// Another viewer, whose token grants team-b only, in a tab of its own.
	if status, _ := call(t, http.MethodPost, gw.URL+"/locks/team-a/ui-lock", tokA, nil, `{"ttl_ms":60000}`); status != http.StatusCreated {
		t.Fatalf("acquire again: got %d, want 201", status)
	}
	if status, _ := call(t, http.MethodGet, gw.URL+"/locks/team-a", tokB, nil, ""); status != http.StatusForbidden {
		t.Fatalf("list team-a with the team-b token: got %d, want 403", status)
	}
	a.run(t, "the first viewer sees the new grant", wait, chromedp.WaitVisible(css(row)))
	b := newTab(t, browserCtx)
	b.run(t, "the other viewer lists team-b, then asks for team-a", wait,
		chromedp.Navigate(gw.URL+"/ui/"),
		chromedp.WaitVisible(css(`#token`)),
		chromedp.SendKeys(css(`#token`), tokB),
		chromedp.Click(css(`#use-token`)),
		until(`document.getElementById('ns-shown').textContent === 'team-b' &&
			document.getElementById('locks-status').textContent === 'no held lock'`),
		chromedp.SetValue(css(`#ns`), "team-a"),
		chromedp.Click(css(`#show`)),
		until(`document.getElementById('error').textContent !== ''`),
	)
	other := value(t, b, "read what the other viewer sees", wait, chromedp.Evaluate[[]string](
		`[document.getElementById('error').textContent, String(document.querySelectorAll('tr[data-lock]').length)]`))
	if !strings.Contains(other[0], "(403)") || other[1] != "0" {
		t.Errorf("the team-b viewer asking for team-a: error %q, %s rows; want a 403 and none", other[0], other[1])
	}

	// Nothing of the page was blocked or failed, and every request went to
	// the gateway, none with the token in its URL.
	for _, tb := range []*tab{a, b} {
		problems, requests := tb.snapshot()
		for _, p := range problems {
			// The browser logs every failed call: the lock's 404 once it is
			// released (the page reads it after the stream's event), and
			// the refused listing of team-a.
			if strings.Contains(p, gw.URL+"/locks/team-a/ui-lock: ") && strings.Contains(p, "404") ||
				strings.Contains(p, gw.URL+"/locks/team-a?limit=100: ") && strings.Contains(p, "403") {
				continue
			}
			t.Errorf("the page reported: %s", p)
		}
		for _, u := range requests {
			if !strings.HasPrefix(u, gw.URL+"/") {
				t.Errorf("a request to another origin: %s", u)
			}
			if strings.Contains(u, tokA) || strings.Contains(u, tokB) {
				t.Errorf("a token in a request's URL: %s", u)
			}
		}
	}

	// The policy is enforced: an inline script, as injected markup would
	// bring, does not run, and the browser reports the violation.
	ran := value(t, a, "inject an inline script", wait, chromedp.Evaluate[bool](`(() => {
		const s = document.createElement('script');
		s.textContent = 'window.injected = true';
		document.body.append(s);
		return window.injected === true;
	})()`))
	if ran {
		t.Fatal("an inline script ran: the Content-Security-Policy is not enforced")
	}
	deadline := time.Now().Add(wait)
	for {
		problems, _ := a.snapshot()
		if strings.Contains(strings.Join(problems, "\n"), "Content Security Policy") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CSP violation reported for the inline script; the page reported: %s", a.reported())
		}
		time.Sleep(50 * time.Millisecond) // polling the collected events, with a deadline
	}
}

// TestDashboardContentionInChromium: a token granted "*" is offered the
// namespaces that have held locks, without typing one; a lock shows its
// value; the contention picture, an SVG, shows waiters as they come and
// their waits once they go; a semaphore the viewer took is listed among
// those the gateway served, and the viewer's own session among its
// sessions.
func TestDashboardContentionInChromium(t *testing.T) {
	gw := startGateway(t, "--ui")
	browserCtx := newBrowser(t)
	const wait = 30 * time.Second // a bound, not a pace
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	until := func(expr string) chromedp.Action[chromedp.Void] {
		return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(wait))
	}
	star := token(t, "ops", "*")
	lock := gw.URL + "/locks/team-c/busy"
	status, held := call(t, http.MethodPost, lock, star, nil, `{"ttl_ms":60000,"value":"leader-10.0.0.3"}`)
	if status != http.StatusCreated {
		t.Fatalf("acquire: got %d, want 201: %v", status, held)
	}

	a := newTab(t, browserCtx)
	a.run(t, "open the dashboard with a * token and pick the namespace it is offered", wait,
		chromedp.Navigate(gw.URL+"/ui/"),
		chromedp.WaitVisible(css(`#token`)),
		chromedp.SendKeys(css(`#token`), star),
		chromedp.Click(css(`#use-token`)),
		chromedp.WaitVisible(css(`#grants button[data-ns="team-c"]`)),
		chromedp.Click(css(`#grants button[data-ns="team-c"]`)),
		chromedp.WaitVisible(css(`tr[data-lock="busy"]`)),
		until(`document.getElementById('contention-status').textContent.startsWith('no waits')`),
	)
	value := value(t, a, "read the lock's value", wait, chromedp.Evaluate[string](
		`document.querySelector('tr[data-lock="busy"] td.value').textContent`))
	if value != "leader-10.0.0.3" {
		t.Errorf("the lock's value: got %q, want leader-10.0.0.3", value)
	}

	// Two callers wait for the lock.
	type result struct {
		status int
		token  string
	}
	waiters := make(chan result, 2)
	for range 2 {
		go func() {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, lock, strings.NewReader(`{"ttl_ms":60000,"wait_ms":30000}`))
			req.Header.Set("Authorization", "Bearer "+star)
			var r result
			if resp, err := http.DefaultClient.Do(req); err == nil {
				var g struct{ Token string }
				json.NewDecoder(resp.Body).Decode(&g)
				resp.Body.Close()
				r = result{resp.StatusCode, g.Token}
			}
			waiters <- r
		}()
	}
	const series = `#contention g[data-lock="busy"]`
	a.run(t, "see two waiters in the picture", wait, until(`(() => {
		const g = document.querySelector('`+series+`');
		return g !== null && g.dataset.waiting === '2' &&
			[...g.querySelectorAll('rect.bar')].some(r => r.dataset.waiters === '2' && Number(r.getAttribute('height')) > 0);
	})()`))

	// The holder releases; each waiter in turn gets the lock and releases it.
	release := func(tok string) {
		t.Helper()
		if status, _ := call(t, http.MethodDelete, lock, star, http.Header{"Lock-Token": {tok}}, ""); status != http.StatusNoContent {
			t.Fatalf("release: got %d, want 204", status)
		}
	}
	release(held["token"].(string))
	for range 2 {
		r := <-waiters
		if r.status != http.StatusCreated {
			t.Fatalf("a waiter: got %d, want 201", r.status)
		}
		release(r.token)
	}
	a.run(t, "see the waiters gone, and their waits drawn", wait, until(`(() => {
		const g = document.querySelector('`+series+`');
		return g !== null && g.dataset.waiting === '0' && g.querySelector('path.wait') !== null &&
			[...g.querySelectorAll('rect.bar')].reduce((n, r) => n + Number(r.dataset.waits), 0) === 2;
	})()`))

	// A semaphore the viewer takes appears in the list of those this
	// gateway served, and shows its permits when picked; a session the
	// viewer opens appears among its sessions, and one of another subject
	// does not.
	if status, p := call(t, http.MethodPost, gw.URL+"/semaphores/team-c/pool-c", star, nil, `{"limit":2,"ttl_ms":60000,"owner":"w-9"}`); status != http.StatusCreated {
		t.Fatalf("take a permit: got %d, want 201: %v", status, p)
	}
	status, opened := call(t, http.MethodPost, gw.URL+"/sessions", star, nil, `{"ttl_ms":60000}`)
	if status != http.StatusCreated {
		t.Fatalf("open a session: got %d, want 201: %v", status, opened)
	}
	if status, p := call(t, http.MethodPost, gw.URL+"/sessions", token(t, "someone-else", "*"), nil, `{"ttl_ms":60000}`); status != http.StatusCreated {
		t.Fatalf("open another subject's session: got %d, want 201: %v", status, p)
	}
	mine := opened["session"].(string)
	a.run(t, "see the semaphore listed, and its permits when picked", wait,
		chromedp.WaitVisible(css(`#sem-list button[data-semaphore="pool-c"]`)),
		chromedp.Click(css(`#sem-list button[data-semaphore="pool-c"]`)),
		until(`document.getElementById('sem-summary').textContent === 'pool-c: 1 of 2 permits held, 0 waiting' &&
			document.querySelector('#sem-holders tr') !== null &&
			document.querySelector('#sem-holders tr').textContent.includes('w-9')`))
	a.run(t, "see the viewer's session, and only it", wait, until(fmt.Sprintf(`(() => {
		const rows = [...document.querySelectorAll('#sessions tr[data-session]')];
		return rows.length === 1 && rows[0].dataset.session === %q &&
			rows[0].querySelector('td.left').textContent.startsWith('≈ ') &&
			document.getElementById('sessions-status').textContent === '1 live session';
	})()`, mine)))
	for _, m := range []string{http.MethodPost, http.MethodDelete} {
		if status, _ := call(t, m, gw.URL+"/ui/api/sessions", star, nil, ""); status != http.StatusMethodNotAllowed {
			t.Errorf("%s /ui/api/sessions: got %d, want 405", m, status)
		}
	}

	problems, _ := a.snapshot()
	for _, p := range problems {
		// The page reads the lock after each event; between grants it is
		// free, a 404 the browser logs.
		if !strings.Contains(p, lock+": ") || !strings.Contains(p, "404") {
			t.Errorf("the page reported: %s", p)
		}
	}
}
