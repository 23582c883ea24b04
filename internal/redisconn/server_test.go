package redisconn_test

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"voiceroom/internal/redisconn"
	"voiceroom/internal/testenv"
)

// TestTLSAndACLAgainstRedis: the client New builds from TLS, TLSCAFile,
// Username and Password talks to a real redis-server that serves TLS only
// to the clients it can verify it to and admits only its ACL user; each
// part missing or wrong is refused, with an error that says why.
func TestTLSAndACLAgainstRedis(t *testing.T) {
	cert, key, _ := testenv.SelfSigned(t, t.TempDir())
	ca := cert // its own CA
	tlsPort := testenv.FreePort(t)
	testenv.RunRedisNode(t, "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", ca, "--tls-auth-clients", "no",
		"--user", "default", "off",
		"--user", "voiceroom", "on", ">s3cret-pass", "~*", "&*", "+@all")
	addr := "127.0.0.1:" + strconv.Itoa(tlsPort)
	testenv.Eventually(t, 20*time.Second, func() error { // the TLS port opens with the plain one
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err
	})
	good := redisconn.Config{Addrs: []string{addr}, TLS: true, TLSCAFile: ca, Username: "voiceroom", Password: "s3cret-pass"}

	rdb, err := redisconn.New(good, "tls-test")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	if err := rdb.Set(t.Context(), "tls-acl-probe", "ok", time.Minute).Err(); err != nil {
		t.Fatalf("SET over TLS as the ACL user: %v", err)
	}
	if v, err := rdb.Get(t.Context(), "tls-acl-probe").Result(); err != nil || v != "ok" {
		t.Fatalf("GET over TLS as the ACL user: %q, %v", v, err)
	}
	if name, err := rdb.ClientGetName(t.Context()).Result(); err != nil || name != "tls-test" {
		t.Errorf("client name %q, %v; want tls-test", name, err)
	}

	refused := []struct {
		name string
		edit func(c *redisconn.Config)
		want string
	}{
		{"wrong password", func(c *redisconn.Config) { c.Password = "wrong" }, "WRONGPASS"},
		{"no user (the default user is off)", func(c *redisconn.Config) { c.Username, c.Password = "", "" }, "NOAUTH"},
		{"the system's roots, not the CA", func(c *redisconn.Config) { c.TLSCAFile = "" }, "certificate"},
		{"no TLS", func(c *redisconn.Config) { c.TLS, c.TLSCAFile = false, "" }, ""},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			bad, err := redisconn.New(c, "")
			if err != nil {
				t.Fatal(err)
			}
			defer bad.Close()
			err = bad.Ping(t.Context()).Err()
			if err == nil {
				t.Fatal("PING answered; want refused")
			}
			if tt.want != "" && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q; want it to say %q", err, tt.want)
			}
		})
	}
}
