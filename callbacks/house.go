package callbacks

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// house is what no callback may reach, whatever the allow-list says: the
// gateway's own listeners, its pprof listener and its Redis. A pattern
// that names one (http://127.0.0.1:*/* once did, for any loopback port)
// would let any tenant that may open a ticket make the gateway POST
// there, with retries.
type house struct {
	// exact are the addresses given, and those their names resolved to.
	exact map[netip.AddrPort]bool
	// local are ports listened on at a loopback or unspecified address:
	// refused on every loopback address and every address of this host.
	local map[uint16]bool
	// localIPs are the addresses of this host's interfaces.
	localIPs map[netip.Addr]bool
	// names are the host:port given with a name, lower case.
	names map[string]bool
}

// newHouse reads hostports, each host:port (a name, an IP address, or
// empty for every address). A name is resolved once, now, within a few
// seconds; an address it later resolves to is not known, but the name
// itself is refused in callback URLs.
func newHouse(ctx context.Context, hostports []string) *house {
	h := &house{exact: map[netip.AddrPort]bool{}, local: map[uint16]bool{}, localIPs: map[netip.Addr]bool{}, names: map[string]bool{}}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				h.localIPs[p.Addr().Unmap()] = true
			}
		}
	}
	for _, hp := range hostports {
		host, portText, err := net.SplitHostPort(hp)
		if err != nil {
			continue
		}
		port, err := checkPort(portText)
		if err != nil {
			continue
		}
		var pn uint16
		fmt.Sscan(port, &pn)
		var ips []netip.Addr
		if host == "" {
			ips = []netip.Addr{netip.IPv6Unspecified()}
		} else if ip, err := netip.ParseAddr(host); err == nil {
			ips = []netip.Addr{ip.Unmap()}
		} else {
			h.names[strings.ToLower(host)+":"+port] = true
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			resolved, _ := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
			cancel()
			for _, ip := range resolved {
				ips = append(ips, ip.Unmap())
			}
		}
		for _, ip := range ips {
			if ip.IsLoopback() || ip.IsUnspecified() {
				h.local[pn] = true
			}
			h.exact[netip.AddrPortFrom(ip, pn)] = true
		}
	}
	return h
}

// refuses reports whether ap is one of the house's addresses.
func (h *house) refuses(ap netip.AddrPort) bool {
	if h == nil {
		return false
	}
	ip := ap.Addr().Unmap()
	if h.exact[netip.AddrPortFrom(ip, ap.Port())] {
		return true
	}
	return h.local[ap.Port()] && (ip.IsLoopback() || ip.IsUnspecified() || h.localIPs[ip])
}

// refusesURL reports whether a URL's host (lower case, an IP address
// unmapped) and port name one of the house's addresses.
func (h *house) refusesURL(host, port string) bool {
	if h == nil {
		return false
	}
	if h.names[host+":"+port] {
		return true
	}
	ap, err := netip.ParseAddrPort(net.JoinHostPort(host, port))
	return err == nil && h.refuses(ap)
}
