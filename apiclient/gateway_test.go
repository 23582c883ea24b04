package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apiclient"
	"voiceroom/authtoken"
	"voiceroom/gateway"
	"voiceroom/internal/testenv"
)

// The envelope as the real gateway writes it, over both ways a Client
// reaches it: the network, and the Loopback the console uses.
func TestCallAgainstTheGateway(t *testing.T) {
	secret := []byte("apiclient-test-secret-0123456789")
	spec := []byte("openapi: 3.0.3\ninfo: {title: t, version: \"1\"}\npaths: {}\n")
	lb := gateway.NewLoopback()
	reg := prometheus.NewRegistry()
	s, err := gateway.New(gateway.Config{Addr: "127.0.0.1:0", JWTSecret: secret}, testenv.Logger(t), reg, reg, nil,
		gateway.DocsRoutes(spec), gateway.ConsoleRoutes(http.NotFoundHandler(), lb))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go s.Serve()
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	admin, err := authtoken.Issue(secret, "app1", 0, authtoken.RoleAdmin, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	for name, c := range map[string]*apiclient.Client{
		"network":  {BaseURL: "http://" + s.Addr()},
		"loopback": {HTTP: &http.Client{Transport: lb}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			err := c.Call(ctx, apiclient.Request{Method: "GET", Path: "/admin/v1/outbox"}, nil)
			var ae *apiclient.Error
			if !errors.As(err, &ae) || ae.Status != 401 || ae.Code != "UNAUTHENTICATED" || ae.RequestID == "" || errors.Is(err, apiclient.ErrRouteNotFound) {
				t.Fatalf("no token: %v (%+v)", err, ae)
			}
			err = c.Call(ctx, apiclient.Request{Method: "GET", Path: "/admin/v1/no-such-route", Token: admin}, nil)
			if !errors.Is(err, apiclient.ErrRouteNotFound) || !apiclient.IsCode(err, "NOT_FOUND") {
				t.Fatalf("a route the server lacks: %v", err)
			}
			if name == "network" {
				status, body, err := c.Get(ctx, c.BaseURL+"/openapi.yaml", 1<<20)
				if err != nil || status != 200 || string(body) != string(spec) {
					t.Fatalf("Get /openapi.yaml: %d %q %v", status, body, err)
				}
			}
		})
	}
}
