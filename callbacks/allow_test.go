package callbacks

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestAllowListCheck(t *testing.T) {
	a, err := ParseAllowList([]string{
		"https://*.example.com/hooks/*",
		"https://api.example.org/lockgate",
		"https://exact.example.net:8443/*",
		"https://anyport.example.org:*/*",
		"http://127.0.0.1:8080/*",
		"http://[::1]:9000/cb/*",
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		url     string
		ok      bool
		allowIP string
		why     string // a word of the error when refused
	}{
		{"https://a.example.com/hooks/x", true, "", ""},
		{"https://a.b.example.com/hooks/x/y?q=1", true, "", ""},
		{"https://A.Example.COM/hooks/x", true, "", ""},
		{"https://example.com/hooks/x", false, "", "allow-list"},
		{"https://evilexample.com/hooks/x", false, "", "allow-list"},
		{"https://a.example.com/other", false, "", "allow-list"},
		{"https://a.example.com:444/hooks/x", false, "", "allow-list"},
		{"https://a.example.com:443/hooks/x", true, "", ""},
		{"http://a.example.com/hooks/x", false, "", "allow-list"},
		{"https://api.example.org/lockgate", true, "", ""},
		{"https://api.example.org/lockgate/more", false, "", "allow-list"},
		{"https://exact.example.net:8443/", true, "", ""},
		{"https://exact.example.net/", false, "", "allow-list"},
		{"http://127.0.0.1:8080/any/path", true, "127.0.0.1", ""},
		{"http://127.0.0.2:8080/any/path", false, "", "allow-list"},
		{"http://127.0.0.1:8081/any/path", false, "", "allow-list"},
		{"http://[::1]:9000/cb/1", true, "::1", ""},
		{"https://a.example.com/hooks/../admin", false, "", "clean"},
		{"https://a.example.com/hooks/%2e%2e/admin", false, "", "clean"},
		{"https://a.example.com/hooks//x", false, "", "clean"},
		{"https://user:pw@a.example.com/hooks/x", false, "", "user info"},
		{"https://a.example.com/hooks/x#frag", false, "", "fragment"},
		{"ftp://a.example.com/hooks/x", false, "", "https"},
		{"/hooks/x", false, "", "absolute"},
		{"https://" + strings.Repeat("a", MaxURLLen) + ".example.com/hooks/x", false, "", "longer"},
		{"https://anyport.example.org:8443/x", true, "", ""},
		{"https://anyport.example.org:99999/x", false, "", "port"},
		{"https://anyport.example.org:0/x", false, "", "port"},
		{"https://anyport.example.org:065535/x", false, "", "port"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			d, err := a.Check(tc.url)
			if tc.ok != (err == nil) {
				t.Fatalf("Check(%q): got %v, want accepted %v", tc.url, err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), tc.why) {
					t.Fatalf("Check(%q): got %v, want ErrNotAllowed saying %q", tc.url, err, tc.why)
				}
				return
			}
			if want, _ := netip.ParseAddr(tc.allowIP); d.allowIP != want {
				t.Fatalf("Check(%q): allows address %v, want %v", tc.url, d.allowIP, want)
			}
		})
	}
}

// TestAllowListHTTPNeedsAPattern: an http URL is refused as "must be
// https" unless some pattern allows http.
func TestAllowListHTTPNeedsAPattern(t *testing.T) {
	a, _ := ParseAllowList([]string{"https://*/*"})
	if _, err := a.Check("http://hooks.example.com/x"); err == nil || !strings.Contains(err.Error(), "must be https") {
		t.Fatalf("got %v, want must be https", err)
	}
	var none *AllowList
	if _, err := none.Check("https://hooks.example.com/x"); err == nil || !strings.Contains(err.Error(), "--callback-allow") {
		t.Fatalf("empty list: got %v, want a refusal naming --callback-allow", err)
	}
}

func TestParsePatternRefuses(t *testing.T) {
	for _, p := range []string{"", "example.com/*", "ftp://x/*", "https://x", "https:///*", "https://a*.example.com/*", "https://*.*.com/*",
		"https://x:99999/*", "https://x:0/*", "http://127.0.0.1:*/*", "http://127.0.0.1/*", "http://[::1]:*/*", "http://10.0.0.1/*"} {
		if _, err := ParsePattern(p); err == nil {
			t.Errorf("ParsePattern(%q): got nil, want an error", p)
		}
	}
}

func TestPublic(t *testing.T) {
	for addr, want := range map[string]bool{
		"93.184.216.34":        true,
		"2606:2800:220:1::248": true,
		"127.0.0.1":            false,
		"::1":                  false,
		"::ffff:127.0.0.1":     false,
		"10.1.2.3":             false,
		"172.16.0.1":           false,
		"192.168.1.1":          false,
		"169.254.169.254":      false, // cloud metadata
		"fe80::1":              false,
		"fc00::1":              false,
		"0.0.0.0":              false,
		"::":                   false,
		"224.0.0.1":            false,
		"100.64.0.1":           false,
		"64:ff9b::a00:1":       false, // NAT64 of 10.0.0.1
		"2002:a00:1::":         false, // 6to4 of 10.0.0.1
		"fec0::1":              false, // site-local, deprecated but routed by some
		"192.0.2.1":            false, // TEST-NET-1
		"198.51.100.7":         false, // TEST-NET-2
		"203.0.113.9":          false, // TEST-NET-3
		"2001:db8::1":          false, // IPv6 documentation
	} {
		if got := public(netip.MustParseAddr(addr)); got != want {
			t.Errorf("public(%s): got %v, want %v", addr, got, want)
		}
	}
}

// TestAllowListMostSpecificDecides: when several patterns match, the most
// specific one decides, whatever their order: the pattern naming an IP
// address and port allows that address, though a broad pattern comes
// first.
func TestAllowListMostSpecificDecides(t *testing.T) {
	for _, order := range [][]string{
		{"http://*:*/*", "http://127.0.0.1:9000/*"},
		{"http://127.0.0.1:9000/*", "http://*:*/*"},
	} {
		a, err := ParseAllowList(order)
		if err != nil {
			t.Fatal(err)
		}
		d, err := a.Check("http://127.0.0.1:9000/hook")
		if err != nil || d.allowIP != netip.MustParseAddr("127.0.0.1") {
			t.Errorf("%v: got %v allowing %v, want 127.0.0.1 allowed", order, err, d.allowIP)
		}
	}
	for _, tc := range []struct{ more, less string }{
		{"https://a.example.com/*", "https://*.example.com/*"},
		{"https://x.a.example.com/*", "https://*.a.example.com/*"},
		{"https://*.a.example.com/*", "https://*.example.com/*"},
		{"https://*.example.com/*", "https://*/*"},
		{"https://a.example.com:443/*", "https://a.example.com:*/*"},
		{"https://a.example.com/hooks/*", "https://a.example.com/*"},
		{"https://a.example.com/hooks/x", "https://a.example.com/hooks/*"},
	} {
		m, _ := ParsePattern(tc.more)
		l, _ := ParsePattern(tc.less)
		if !moreSpecific(m, l) || moreSpecific(l, m) {
			t.Errorf("%s should be more specific than %s", tc.more, tc.less)
		}
	}
}
