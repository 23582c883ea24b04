package gateway

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// The client's address, behind reverse proxies (docs/proxy.md).
//
// A request's client is its TCP peer, unless that peer is a trusted proxy
// (Config.TrustedProxies). Then X-Forwarded-For holds the chain of
// addresses the request passed, each proxy appending the peer it saw; a
// client may start the chain with anything it likes, so it is read from
// the right: the first address that is not a trusted proxy is the client.
// An untrusted peer's X-Forwarded-For is ignored whatever it says. The
// rate limits are per authenticated principal (ratelimit.go) and do not
// read the address; the access log and the error log do.

// headerForwardedFor is the header trusted proxies append the peer they
// saw to (nginx's $proxy_add_x_forwarded_for).
const headerForwardedFor = "X-Forwarded-For"

// parseTrustedProxies reads single addresses (10.0.0.5, ::1) and CIDR
// prefixes (10.0.0.0/8); an IPv4-mapped IPv6 address counts as IPv4.
func parseTrustedProxies(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			if p.Addr().Is4In6() {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("%q: want an IP address or a CIDR prefix (10.0.0.0/8)", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// clientIP is the address of the request's client (clientOf).
func (s *Server) clientIP(c *fiber.Ctx) netip.Addr {
	peer, _ := netip.AddrFromSlice(c.Context().RemoteIP())
	if len(s.trusted) == 0 {
		return peer.Unmap()
	}
	return clientOf(peer, c.Request().Header.PeekAll(headerForwardedFor), s.trusted)
}

// clientOf is the client of a request from peer with the X-Forwarded-For
// headers forwarded, given the trusted proxies: peer, unless it is
// trusted; then the rightmost address of the chain that is not trusted
// (the leftmost one when all are); an entry that is no address stops the
// walk at the address to its right, the last one a trusted proxy wrote.
func clientOf(peer netip.Addr, forwarded [][]byte, trusted []netip.Prefix) netip.Addr {
	trusts := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	client := peer.Unmap()
	if !trusts(client) {
		return client
	}
	// Later headers were appended later: walk them, and each one's
	// comma-separated entries, from the right.
	for i := len(forwarded) - 1; i >= 0; i-- {
		v := forwarded[i]
		for len(v) > 0 {
			var entry []byte
			if k := bytes.LastIndexByte(v, ','); k >= 0 {
				entry, v = v[k+1:], v[:k]
			} else {
				entry, v = v, nil
			}
			a, ok := forwardedAddr(entry)
			if !ok {
				return client
			}
			client = a
			if !trusts(a) {
				return a
			}
		}
	}
	return client
}

// forwardedAddr reads one X-Forwarded-For entry: an address, possibly with
// a port (1.2.3.4:5678, [2001:db8::1]:80).
func forwardedAddr(entry []byte) (netip.Addr, bool) {
	s := strings.TrimSpace(string(entry))
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}

// accessLog logs each request of the public listener once answered, with
// the status the error handler will write. Health checks that pass are
// left out: probes would fill the log.
func (s *Server) accessLog(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	status := answeredStatus(c, err)
	if status < 300 && (c.Path() == "/healthz" || c.Path() == "/readyz") {
		return err
	}
	s.log.Info("http request", "method", c.Method(), "path", c.Path(), "status", status,
		"duration", time.Since(start), "client_ip", s.clientIP(c).String(), "request_id", RequestID(c))
	return err
}
