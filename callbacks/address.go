package callbacks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// ErrRefusedAddress is a connection the gateway did not make: the
// destination resolved to an address that is not public, and its pattern
// did not name that address.
var ErrRefusedAddress = errors.New("callback destination address refused")

// nonPublic are ranges beyond those netip names (loopback, private,
// link-local, multicast, unspecified) that must not be reached by name:
// shared address space, IETF protocol assignments, benchmarking, reserved,
// the IPv6 prefixes that embed an IPv4 address (NAT64, 6to4, Teredo), the
// deprecated site-local prefix, and the documentation networks, which no
// receiver on the internet has.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("fec0::/10"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("2001:db8::/32"),
}

// public reports whether ip may be called without a pattern naming it.
func public(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsUnspecified() ||
		ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() ||
		ip.IsMulticast() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// allowedAddress is the one non-public address a request may reach, carried
// by the request's context to the dialer.
type allowedAddress struct{}

// dialer makes connections only to public addresses, or to the one the
// request's pattern named. The check runs on the address the connection
// is made to, after DNS, so a name that resolves differently at connect
// time (DNS rebinding) is checked on what it resolved to then.
//
// The gateway's own addresses (house) are refused whatever the patterns
// say. timeout bounds the connection alone.
func dialer(timeout time.Duration, house func() *house) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		allow, _ := ctx.Value(allowedAddress{}).(netip.Addr)
		d := net.Dialer{Timeout: timeout, Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrRefusedAddress, err)
			}
			if ip := ap.Addr().Unmap(); !public(ip) && ip != allow {
				return fmt.Errorf("%w: %s is not public", ErrRefusedAddress, ip)
			}
			if house().refuses(ap) {
				return fmt.Errorf("%w: %s is the gateway's own", ErrRefusedAddress, ap)
			}
			return nil
		}}
		return d.DialContext(ctx, network, addr)
	}
}
