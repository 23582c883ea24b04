// Package redisconn builds voiceroom's one Redis client, whatever the
// deployment's Redis is: a single server, a Redis Cluster, or a master
// watched by Sentinel. Every process, role and one-shot command gets its
// client from [New]; packages take a redis.UniversalClient and never ask
// which kind it is, except where a cluster needs a command split per hash
// slot ([MGet]).
//
// # Hash tags: how a key layout picks its slot
//
// On a cluster, Redis places a key by the CRC16 of its hash tag (the text
// between the first { and the next }, or the whole key without one) into
// one of 16384 slots, and each master serves some of the slots. A command
// or Lua script that touches several keys, and a MULTI/EXEC block, must
// touch keys of one slot (else CROSSSLOT). So a key layout picks its tag
// by what is done atomically together, and no wider:
//
//   - the keys one script or transaction touches share the tag (the room
//     list's sets of a region and their ready key: {app:region}; a room's
//     ranks journal, floor and sets: {app:room});
//   - a key read or written alone gets the narrowest tag that names it (a
//     room's card: {app:room}), so that keys spread over every master;
//   - a multi-key read that is not atomic (a page of cards) is split per
//     slot ([MGet]), not forced into one slot by a wide tag.
//
// The cost: everything under one tag lives on one master. A tag per app
// would put a whole app on one master; a tag per app and region puts one
// region's list on one master, so one hot region is served by one master
// however many there are (its replicas can share its reads; more masters
// do not help it). A new layout (a leaderboard's sorted sets, say) should
// tag per board or per board and period, never per app, and assert in a
// test that each script's keys share a slot ([Slot]; the suites also run
// against a real cluster, which refuses a cross-slot script).
//
// Sentinel and a single server have one keyspace: tags change nothing
// there, and [MGet] is one MGET as before.
package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/apperr"
)

// ErrInvalidConfig is wrapped by every error of Config.Validate.
var ErrInvalidConfig = errors.New("redis: invalid configuration")

// Config says how to reach Redis.
type Config struct {
	// Addrs is where Redis is: one host:port (or a unix socket's absolute
	// path) for a single server; several host:port for a Redis Cluster
	// (some of its nodes: the client learns the rest); with
	// SentinelMaster, the sentinels. Empty: no Redis.
	Addrs []string
	// SentinelMaster is the name of the master the sentinels at Addrs
	// watch; the client follows it across failovers.
	SentinelMaster string
	// SentinelUsername and SentinelPassword authenticate to the sentinels
	// (default: none).
	SentinelUsername, SentinelPassword string
	// Username and Password authenticate to the Redis servers (ACL user;
	// default: none, or the default user when only Password is set).
	Username, Password string
	// DB is the database of a single server or Sentinel's master, 0..15; a
	// cluster has only 0.
	DB int
	// TLS connects over TLS, verifying the servers with the system's
	// roots or, when TLSCAFile is set, with the PEM certificates in it.
	TLS       bool
	TLSCAFile string
}

// Enabled reports whether c names a Redis at all.
func (c Config) Enabled() bool { return len(c.Addrs) > 0 }

// Cluster reports whether c is a Redis Cluster (several addresses, no
// Sentinel).
func (c Config) Cluster() bool { return len(c.Addrs) > 1 && c.SentinelMaster == "" }

// Describe names the Redis c reaches, for logs and reports.
func (c Config) Describe() string {
	switch {
	case !c.Enabled():
		return "off"
	case c.SentinelMaster != "":
		return "sentinel master " + c.SentinelMaster + " via " + strings.Join(c.Addrs, ",")
	case c.Cluster():
		return "cluster " + strings.Join(c.Addrs, ",")
	default:
		return c.Addrs[0]
	}
}

// Validate checks c without changing it.
func (c Config) Validate() error {
	checks := apperr.NewConfigChecks(ErrInvalidConfig)
	for _, a := range c.Addrs {
		if strings.HasPrefix(a, "/") && len(c.Addrs) == 1 && c.SentinelMaster == "" {
			continue // a unix socket
		}
		_, _, err := net.SplitHostPort(a)
		checks.Check(err == nil, "Addrs", "redis address %q: want host:port", a)
	}
	checks.Check(c.SentinelMaster == "" || c.Enabled(), "SentinelMaster", "redis sentinel master %q without sentinel addresses", c.SentinelMaster)
	checks.Check(c.DB >= 0 && c.DB <= 15, "DB", "redis db: want 0..15, got %d", c.DB)
	checks.Check(c.DB == 0 || !c.Cluster(), "DB", "redis db: a cluster has only db 0, got %d", c.DB)
	checks.Check(c.TLSCAFile == "" || c.TLS, "TLSCAFile", "redis tls ca file set without tls")
	return checks.Err()
}

// ClusterStateReload is how old a cluster client's map of the slots may
// grow before it is read again (CLUSTER SLOTS on one node, in the
// background). go-redis's default is a minute: after a failover a writer
// would keep sending a promoted replica's slots to the dead master for
// that long (redirections refresh the map only when a node answers).
const ClusterStateReload = 5 * time.Second

// New returns the client c describes: a *redis.ClusterClient for a
// cluster, a *redis.Client (following the master) for Sentinel, a
// *redis.Client otherwise. It does not connect: the client dials on first
// use, and reconnects by itself. name is the client name Redis shows in
// CLIENT LIST ("" for none).
func New(c Config, name string) (redis.UniversalClient, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.Enabled() {
		return nil, apperr.BadConfig("Addrs", "%w: no redis address", ErrInvalidConfig)
	}
	var tc *tls.Config
	if c.TLS {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
		if c.TLSCAFile != "" {
			pem, err := os.ReadFile(c.TLSCAFile)
			if err != nil {
				return nil, apperr.BadConfig("TLSCAFile", "%w: redis tls ca file: %v", ErrInvalidConfig, err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, apperr.BadConfig("TLSCAFile", "%w: redis tls ca file %s: no PEM certificate in it", ErrInvalidConfig, c.TLSCAFile)
			}
			tc.RootCAs = pool
		}
	}
	switch {
	case c.SentinelMaster != "":
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: c.SentinelMaster, SentinelAddrs: c.Addrs,
			SentinelUsername: c.SentinelUsername, SentinelPassword: c.SentinelPassword,
			Username: c.Username, Password: c.Password, DB: c.DB, TLSConfig: tc, ClientName: name,
		}), nil
	case c.Cluster():
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: c.Addrs, Username: c.Username, Password: c.Password, TLSConfig: tc, ClientName: name,
			ClusterStateReloadInterval: ClusterStateReload,
		}), nil
	default:
		return redis.NewClient(&redis.Options{
			Addr: c.Addrs[0], Username: c.Username, Password: c.Password, DB: c.DB, TLSConfig: tc, ClientName: name,
		}), nil
	}
}

// IsCluster reports whether rdb is a cluster's client.
func IsCluster(rdb redis.UniversalClient) bool {
	_, ok := rdb.(*redis.ClusterClient)
	return ok
}

// MGet queues in p the reading of keys and returns a function that, after
// p's Exec, gives their values in keys' order (nil for a key Redis lacks
// or an error). On a single server (cluster false) it is one MGET; on a
// cluster, one MGET per hash slot, which the cluster client sends to each
// slot's master in parallel.
func MGet(ctx context.Context, p redis.Pipeliner, cluster bool, keys []string) func() ([]any, error) {
	if !cluster {
		cmd := p.MGet(ctx, keys...)
		return cmd.Result
	}
	type group struct {
		idx []int
		cmd *redis.SliceCmd
	}
	bySlot := map[int]*group{}
	var order []*group
	for i, k := range keys {
		s := Slot(k)
		g := bySlot[s]
		if g == nil {
			g = &group{}
			bySlot[s] = g
			order = append(order, g)
		}
		g.idx = append(g.idx, i)
	}
	for _, g := range order {
		ks := make([]string, len(g.idx))
		for j, i := range g.idx {
			ks[j] = keys[i]
		}
		g.cmd = p.MGet(ctx, ks...)
	}
	return func() ([]any, error) {
		out := make([]any, len(keys))
		for _, g := range order {
			vals, err := g.cmd.Result()
			if err != nil {
				return nil, fmt.Errorf("mget: %w", err)
			}
			for j, i := range g.idx {
				out[i] = vals[j]
			}
		}
		return out, nil
	}
}
