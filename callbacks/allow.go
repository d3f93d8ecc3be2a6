package callbacks

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// ErrNotAllowed is a callback URL that no pattern of the allow-list
// matches, or that is not one the gateway calls at all.
var ErrNotAllowed = errors.New("callback URL not allowed")

// MaxURLLen bounds a callback URL.
const MaxURLLen = 2048

// Pattern is one entry of the allow-list: scheme://host[:port]/path, where
// scheme is https or http (http only when a pattern says so), host is a
// name, "*.suffix" (any name under suffix, not suffix itself), "*" (any
// host) or an IP address (IPv6 in brackets), port is a number or "*" (left
// out: the scheme's default), and path may hold "*" for any run of
// characters, "/" included.
//
// A pattern whose host is an IP address allows that address even when it
// is loopback, link-local or private: the one way to allow one. Such a
// pattern must name its port, so that it opens one service of that
// address, not all of them. A pattern with a name never does, whatever
// the name resolves to.
//
// When several patterns match a URL, the most specific decides (see
// moreSpecific), whatever their order.
type Pattern struct {
	raw    string
	scheme string
	host   string     // lowercase; "*" or "*.suffix" for wildcards
	ip     netip.Addr // valid when host is an IP address
	port   string     // "*" for any
	path   string
}

// ParsePattern parses one allow-list entry.
func ParsePattern(s string) (Pattern, error) {
	p := Pattern{raw: s}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || (scheme != "https" && scheme != "http") {
		return p, fmt.Errorf("callback pattern %q: want https:// or http:// then host[:port]/path", s)
	}
	p.scheme = scheme
	hostport, pth, ok := strings.Cut(rest, "/")
	if !ok {
		return p, fmt.Errorf("callback pattern %q: want a path, /* for any", s)
	}
	p.path = "/" + pth
	host, port := hostport, ""
	if h, pt, err := net.SplitHostPort(hostport); err == nil {
		host, port = h, pt
	} else if strings.HasPrefix(hostport, "[") && strings.HasSuffix(hostport, "]") {
		host = hostport[1 : len(hostport)-1]
	}
	p.host = strings.ToLower(host)
	switch {
	case p.host == "":
		return p, fmt.Errorf("callback pattern %q: want a host, * for any", s)
	case strings.Contains(strings.TrimPrefix(p.host, "*."), "*") && p.host != "*":
		return p, fmt.Errorf("callback pattern %q: a host may only start with *. or be *", s)
	}
	if ip, err := netip.ParseAddr(p.host); err == nil {
		p.ip = ip.Unmap()
		p.host = p.ip.String()
		if port == "" || port == "*" {
			return p, fmt.Errorf("callback pattern %q: a pattern with an IP address must name its port (such as http://127.0.0.1:9000/*): "+
				"it would allow every service of that address", s)
		}
	}
	if port == "" {
		port = defaultPort(scheme)
	} else if port != "*" {
		if _, err := checkPort(port); err != nil {
			return p, fmt.Errorf("callback pattern %q: %v", s, err)
		}
	}
	p.port = port
	return p, nil
}

func (p Pattern) String() string { return p.raw }

// checkPort returns a port from 1 to 65535 in its plain decimal form
// (no sign, no leading zero), or an error.
func checkPort(s string) (string, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != s {
		return "", fmt.Errorf("port %q is not a number from 1 to 65535", s)
	}
	return s, nil
}

func defaultPort(scheme string) string {
	if scheme == "http" {
		return "80"
	}
	return "443"
}

// matches reports whether the URL's parts, as Check prepared them, fall
// under p.
func (p Pattern) matches(scheme, host, port, escapedPath string) bool {
	if p.scheme != scheme || (p.port != "*" && p.port != port) {
		return false
	}
	switch {
	case p.host == "*":
	case strings.HasPrefix(p.host, "*."):
		if !strings.HasSuffix(host, p.host[1:]) || len(host) <= len(p.host)-1 {
			return false
		}
	case p.ip.IsValid():
		ip, err := netip.ParseAddr(host)
		if err != nil || ip.Unmap() != p.ip {
			return false
		}
	case p.host != host:
		return false
	}
	return glob(p.path, escapedPath)
}

// moreSpecific reports whether p is more specific than q, so that it
// decides for a URL both match: an IP address before a name, a name
// before "*.suffix", a longer suffix before a shorter one, any of them
// before "*"; then a port before "*"; then the path with more characters
// before its first "*" (a path with no "*" before any with one).
func moreSpecific(p, q Pattern) bool {
	if a, b := hostRank(p), hostRank(q); a != b {
		return a > b
	}
	if a, b := p.port != "*", q.port != "*"; a != b {
		return a
	}
	return pathRank(p.path) > pathRank(q.path)
}

// hostRank orders hosts by how much they name: "*" 0, "*.suffix" 1 plus
// its length, a name 1<<16, an IP address 1<<17.
func hostRank(p Pattern) int {
	switch {
	case p.ip.IsValid():
		return 1 << 17
	case p.host == "*":
		return 0
	case strings.HasPrefix(p.host, "*."):
		return 1 + len(p.host)
	}
	return 1 << 16
}

// pathRank orders paths by the literal characters before the first "*";
// one without "*" names a single path and ranks above all.
func pathRank(path string) int {
	if i := strings.IndexByte(path, '*'); i >= 0 {
		return i
	}
	return 1 << 20
}

// glob reports whether s matches pattern, whose "*" matches any run of
// characters.
func glob(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	s, rest := s[star:], pattern[star+1:]
	for i := 0; i <= len(s); i++ {
		if glob(rest, s[i:]) {
			return true
		}
	}
	return false
}

// AllowList is the operator's allow-list of callback destinations.
type AllowList struct{ patterns []Pattern }

// ParseAllowList parses patterns (see Pattern); none is an allow-list
// that refuses every URL.
func ParseAllowList(patterns []string) (*AllowList, error) {
	a := &AllowList{}
	for _, s := range patterns {
		p, err := ParsePattern(s)
		if err != nil {
			return nil, err
		}
		a.patterns = append(a.patterns, p)
	}
	return a, nil
}

// Empty reports whether the list allows nothing.
func (a *AllowList) Empty() bool { return a == nil || len(a.patterns) == 0 }

// Destination is a callback URL the allow-list accepted, with the address
// its pattern allows although it is not public, if any.
type Destination struct {
	url      string
	host     string // for logs: never the path or query, which may hold the receiver's secrets
	hostname string // lower case, an IP address unmapped
	port     string
	allowIP  netip.Addr // valid: this address is allowed, private or not
}

// Host is the destination's host, for logs.
func (d Destination) Host() string { return d.host }

// Check accepts raw when a pattern allows it: an absolute http(s) URL
// with no user info or fragment, whose path is clean (no "." or ".."
// segments, which a receiver would resolve past the pattern's path).
// Its error says why not, and wraps ErrNotAllowed.
func (a *AllowList) Check(raw string) (Destination, error) {
	if a.Empty() {
		return Destination{}, fmt.Errorf("%w: this gateway allows no callback destinations (its operator sets them with --callback-allow)", ErrNotAllowed)
	}
	if len(raw) > MaxURLLen {
		return Destination{}, fmt.Errorf("%w: longer than %d bytes", ErrNotAllowed, MaxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" || u.Host == "" {
		return Destination{}, fmt.Errorf("%w: not an absolute URL", ErrNotAllowed)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return Destination{}, fmt.Errorf("%w: must be https", ErrNotAllowed)
	}
	if u.User != nil || u.Fragment != "" || u.RawFragment != "" {
		return Destination{}, fmt.Errorf("%w: no user info or fragment", ErrNotAllowed)
	}
	p := u.Path
	if p == "" {
		p = "/"
	}
	if c := path.Clean(p); c != p && c+"/" != p {
		return Destination{}, fmt.Errorf("%w: its path must be clean (no . or .. segments, no //)", ErrNotAllowed)
	}
	host := strings.ToLower(u.Hostname())
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.Unmap().String()
	}
	port := u.Port()
	if port == "" {
		port = defaultPort(scheme)
	} else if port, err = checkPort(port); err != nil {
		return Destination{}, fmt.Errorf("%w: %v", ErrNotAllowed, err)
	}
	escaped := u.EscapedPath()
	if escaped == "" {
		escaped = "/"
	}
	httpAllowed := false
	var best *Pattern
	for i, pt := range a.patterns {
		httpAllowed = httpAllowed || pt.scheme == "http"
		if pt.matches(scheme, host, port, escaped) && (best == nil || moreSpecific(pt, *best)) {
			best = &a.patterns[i]
		}
	}
	if best != nil {
		u.Scheme = scheme
		return Destination{url: u.String(), host: u.Host, hostname: host, port: port, allowIP: best.ip}, nil
	}
	if scheme == "http" && !httpAllowed {
		return Destination{}, fmt.Errorf("%w: must be https (no --callback-allow pattern allows http)", ErrNotAllowed)
	}
	return Destination{}, fmt.Errorf("%w: not on this gateway's allow-list (--callback-allow)", ErrNotAllowed)
}
