package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"voiceroom/apperr"
)

// MaxURLBytes bounds an endpoint's URL.
const MaxURLBytes = 2048

// Policy is what an endpoint's URL may be, checked when an admin sets it
// and again, address by address, every time a delivery dials it.
type Policy struct {
	// AllowHTTP accepts http:// URLs; otherwise only https://.
	// VOICEROOM_WEBHOOKS_ALLOW_HTTP, default off.
	AllowHTTP bool
	// AllowPrivate accepts hosts that are or resolve to loopback, private,
	// link-local and other internal addresses (see allowedAddr); otherwise
	// such a URL is refused at creation and such an address is never
	// dialled. VOICEROOM_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES, default off.
	AllowPrivate bool
	// Resolver looks host names up. Default net.DefaultResolver.
	Resolver *net.Resolver
}

// resolveTimeout bounds the lookup of a URL's host at creation.
const resolveTimeout = 5 * time.Second

// CheckURL returns the normalised URL if raw is one an endpoint may have:
// absolute, https (or http when allowed), a host, no user or password (a
// secret in a URL ends up in logs), no fragment, at most MaxURLBytes; and
// unless AllowPrivate, a host that neither is nor resolves to an address
// allowedAddr refuses. Errors are INVALID_ARGUMENT naming the field url
// (a host that does not resolve too: the check cannot be made).
func (p Policy) CheckURL(ctx context.Context, raw string) (string, error) {
	bad := func(format string, args ...any) (string, error) { return "", apperr.Invalid("url", format, args...) }
	if raw == "" || len(raw) > MaxURLBytes {
		return bad("want an https URL of 1 to %d bytes", MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("not a URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && p.AllowHTTP:
	case u.Scheme == "http":
		return bad("must be https (http is allowed only where the operator allows it)")
	default:
		return bad("must be https")
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return bad("must name a host")
	}
	if u.User != nil {
		return bad("must not hold a user or password")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return bad("must not hold a fragment")
	}
	if p.AllowPrivate {
		return u.String(), nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if err := allowedAddr(ip); err != nil {
			return bad("%v", err)
		}
		return u.String(), nil
	}
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	ips, err := p.resolver().LookupNetIP(rctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return bad("host %q does not resolve", host)
	}
	for _, ip := range ips {
		if err := allowedAddr(ip); err != nil {
			return bad("host %q: %v", host, err)
		}
	}
	return u.String(), nil
}

func (p Policy) resolver() *net.Resolver {
	if p.Resolver != nil {
		return p.Resolver
	}
	return net.DefaultResolver
}

// internalPrefixes are ranges no public webhook lives in, beyond what
// netip's predicates name: "this network", carrier-grade NAT (shared
// address space, RFC 6598), benchmarking, IPv4 reserved and broadcast,
// IPv6 discard-only and NAT64 (which maps to IPv4 that must be checked in
// its own right).
var internalPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// allowedAddr refuses loopback, private (RFC 1918, fc00::/7), link-local
// (169.254/16 with the cloud metadata address, fe80::/10), unspecified and
// multicast addresses and internalPrefixes. An IPv4-mapped IPv6 address
// is judged as the IPv4 address it carries. Errors wrap
// ErrAddressNotAllowed.
func allowedAddr(ip netip.Addr) error {
	ip = ip.Unmap()
	if ip.Zone() != "" {
		ip = ip.WithZone("")
	}
	what := ""
	switch {
	case !ip.IsValid():
		what = "invalid"
	case ip.IsLoopback():
		what = "loopback"
	case ip.IsPrivate():
		what = "private"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		what = "link-local"
	case ip.IsUnspecified():
		what = "unspecified"
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast():
		what = "multicast"
	}
	for _, p := range internalPrefixes {
		if what == "" && p.Contains(ip) {
			what = "internal"
		}
	}
	if what != "" {
		return fmt.Errorf("%w: %s is a %s address", ErrAddressNotAllowed, ip, what)
	}
	return nil
}

// dialer returns the dialer of deliveries. Unless AllowPrivate, its
// Control hook checks the very address each connection is about to reach,
// after the lookup: a name that resolved to a public address when the
// admin set the URL and to an internal one now (DNS rebinding) is refused
// with ErrAddressNotAllowed, and so is every other address it resolves to.
func (p Policy) dialer(timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Resolver: p.Resolver}
	if !p.AllowPrivate {
		d.Control = func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %q: %w", ErrAddressNotAllowed, address, err)
			}
			return allowedAddr(ap.Addr())
		}
	}
	return d
}

// refusedAddress reports whether err is a dial the policy refused.
func refusedAddress(err error) bool { return errors.Is(err, ErrAddressNotAllowed) }
