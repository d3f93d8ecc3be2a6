package callbacks

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path"
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
// is loopback, link-local or private: the one way to allow one. A
// pattern with a name never does, whatever the name resolves to.
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
	}
	if port == "" {
		port = defaultPort(scheme)
	}
	p.port = port
	return p, nil
}

func (p Pattern) String() string { return p.raw }

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
	url     string
	host    string     // for logs: never the path or query, which may hold the receiver's secrets
	allowIP netip.Addr // valid: this address is allowed, private or not
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
	}
	escaped := u.EscapedPath()
	if escaped == "" {
		escaped = "/"
	}
	httpAllowed := false
	for _, pt := range a.patterns {
		httpAllowed = httpAllowed || pt.scheme == "http"
		if pt.matches(scheme, host, port, escaped) {
			u.Scheme = scheme
			return Destination{url: u.String(), host: u.Host, allowIP: pt.ip}, nil
		}
	}
	if scheme == "http" && !httpAllowed {
		return Destination{}, fmt.Errorf("%w: must be https (no --callback-allow pattern allows http)", ErrNotAllowed)
	}
	return Destination{}, fmt.Errorf("%w: not on this gateway's allow-list (--callback-allow)", ErrNotAllowed)
}
