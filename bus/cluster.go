package bus

import (
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/nats-io/nats-server/v2/server"

	"voiceroom/apperr"
)

// ClusterConfig joins an embedded server to a NATS cluster, so that
// JetStream replicates streams across its servers (StreamConfig.Replicas
// 3). The zero value runs the server alone.
//
// An embedded cluster has no authentication on its routes, so it listens
// on loopback only: it serves tests and a cluster on one machine. Servers
// on several machines are plain nats-server processes (deploy/nats).
type ClusterConfig struct {
	// Name is the cluster's name, the same on every server of the
	// cluster. Required when any other field is set.
	Name string
	// Listen is the loopback host:port where the other servers' routes
	// connect. Port -1 or 0 picks a free port, but then the others cannot
	// know it in advance. Required with Name.
	Listen string
	// Routes are the route URLs (nats-route://host:port) of every server
	// of the cluster, this one's included: JetStream expects as many
	// servers as routes before it elects a meta leader, and a server
	// ignores the route to itself. Required with Name; each server needs
	// its own EmbeddedConfig.ServerName.
	Routes []string
}

// enabled reports whether c asks for a cluster.
func (c ClusterConfig) enabled() bool {
	return c.Name != "" || c.Listen != "" || len(c.Routes) > 0
}

// Validate checks c; the zero value is valid. Errors are
// *apperr.ConfigError naming the field and wrap ErrInvalidConfig.
func (c ClusterConfig) Validate() error {
	if !c.enabled() {
		return nil
	}
	if err := checkToken("name", c.Name); err != nil {
		return apperr.BadConfig("Name", "%w: embedded nats cluster: %w", ErrInvalidConfig, err)
	}
	if _, _, err := parseListen(c.Listen); err != nil {
		return apperr.BadConfig("Listen", "embedded nats cluster %s: %w", c.Name, err) // err wraps ErrInvalidConfig
	}
	if len(c.Routes) == 0 {
		return apperr.BadConfig("Routes", "%w: embedded nats cluster %s: routes: name every server's route URL", ErrInvalidConfig, c.Name)
	}
	for _, r := range c.Routes {
		if _, err := routeURL(r); err != nil {
			return apperr.BadConfig("Routes", "%w: embedded nats cluster %s: %w", ErrInvalidConfig, c.Name, err)
		}
	}
	return nil
}

// routeURL parses one route URL: nats-route:// or nats://, host and port.
func routeURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("route %q: %w", s, err)
	}
	if u.Scheme != "nats-route" && u.Scheme != "nats" {
		return nil, fmt.Errorf("route %q: scheme must be nats-route or nats", s)
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return nil, fmt.Errorf("route %q: want host:port", s)
	}
	return u, nil
}

// apply sets the cluster options of a validated c on opts.
func (c ClusterConfig) apply(opts *server.Options) {
	if !c.enabled() {
		return
	}
	host, port, _ := parseListen(c.Listen) // checked by Validate
	opts.Cluster.Name = c.Name
	opts.Cluster.Host = host
	opts.Cluster.Port = port
	for _, r := range c.Routes {
		u, _ := routeURL(r) // checked by Validate
		opts.Routes = append(opts.Routes, u)
	}
}

// probeAddr is the fixed route address to probe before start, or "" when
// the port is picked by the server.
func (c ClusterConfig) probeAddr() string {
	if !c.enabled() {
		return ""
	}
	host, port, _ := parseListen(c.Listen)
	if port == server.RANDOM_PORT {
		return ""
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// ClusterAddr returns the host:port the server's routes listen on, or ""
// when it runs alone.
func (s *Server) ClusterAddr() string {
	addr := s.ns.ClusterAddr()
	if addr == nil {
		return ""
	}
	return addr.String()
}

// Name returns the server's name, as JetStream reports it in stream and
// consumer cluster information.
func (s *Server) Name() string {
	return s.ns.Name()
}
