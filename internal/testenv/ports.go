package testenv

import (
	"net"
	"testing"
)

// Ports: code under test that listens is given port 0 (or -1 for the
// embedded NATS server) and the test reads the address it took
// (Server.Addr, ClientURL, a logged address), so no other process can take
// the port between choosing and binding it. ClosedAddr is only for an
// address that must refuse connections.

// ClosedAddr returns a loopback address nobody listens on: a port bound
// and released again.
func ClosedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
