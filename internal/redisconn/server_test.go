package redisconn_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
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
	dir := t.TempDir()
	ca := writeTestPKI(t, dir)
	tlsPort := testenv.FreePort(t)
	testenv.RunRedisNode(t, "--tls-port", strconv.Itoa(tlsPort),
		"--tls-cert-file", filepath.Join(dir, "server.pem"), "--tls-key-file", filepath.Join(dir, "server.key"),
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

// writeTestPKI writes a CA (returned: its PEM file) and a server
// certificate for 127.0.0.1 it signed (server.pem, server.key) into dir.
func writeTestPKI(t *testing.T, dir string) string {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "voiceroom test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("server.pem", "CERTIFICATE", srvDER)
	write("server.key", "EC PRIVATE KEY", keyDER)
	return write("ca.pem", "CERTIFICATE", caDER)
}
