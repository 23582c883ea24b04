package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// TestServeReadsFromTheReplica: serve with VOICEROOM_MYSQL_REPLICA_DSN
// reads the audit trail (a read that tolerates lag) from the replica: a
// room and its audit row written only on the replica are served; with
// the replica's SQL thread stopped, the same read goes to the primary,
// which has no such room (404). The replica's lag and fitness are on
// /metrics, named by its address.
func TestServeReadsFromTheReplica(t *testing.T) {
	rep := testenv.RunMySQLReplica(t)
	source, dsn := testenv.NewSourceDB(t)
	p, vars := startServe(t, "VOICEROOM_MYSQL_DSN="+dsn, "VOICEROOM_MYSQL_REPLICA_DSN="+rep.DSN(""))
	base := p.waitServing(t, vars)
	rep.WaitFor(t)
	fit := fmt.Sprintf(`voiceroom_mysql_replica_fit{replica=%q} 1`, rep.Socket())
	testenv.Eventually(t, 30*time.Second, func() error {
		_, _, body := testenv.Fetch(t, "GET", opsURL(vars)+"/metrics")
		if !strings.Contains(body, fit) {
			return fmt.Errorf("no %s on /metrics", fit)
		}
		return nil
	})

	dbName := testenv.Scalar[string](t, source, "SELECT DATABASE()")
	onReplica := rep.ServerDB()
	testenv.Exec(t, onReplica,
		"INSERT INTO `"+dbName+"`.rooms (app_code, room_id, room_short_id, owner_user_id, status, visible_region_id, mode, room_version, created_at_ms, updated_at_ms) VALUES ('e2e', 'e2e_only_on_replica', 's1', 7, 'active', 1, 'voice', 1, 1, 1)",
		"INSERT INTO `"+dbName+"`.room_audit (app_code, room_id, room_version, operator, action, reason, created_at_ms) VALUES ('e2e', 'e2e_only_on_replica', 1, 'admin:op', 'ban', 'replica row', 1)")
	c := &client{t: t, base: base, secret: []byte(testJWTSecret)}
	var page struct {
		Items []struct {
			Reason string `json:"reason"`
		} `json:"items"`
	}
	audit := func() (int, string) {
		t.Helper()
		return c.call("GET", "/admin/v1/rooms/e2e_only_on_replica/audit", "admin", "", &page)
	}
	if code, body := audit(); code != http.StatusOK || len(page.Items) != 1 || page.Items[0].Reason != "replica row" {
		t.Fatalf("audit of a room only the replica has: %d %s %+v", code, body, page)
	}

	testenv.Exec(t, onReplica, "STOP SLAVE SQL_THREAD")
	testenv.Eventually(t, 30*time.Second, func() error {
		if code, body := audit(); code != http.StatusNotFound {
			return fmt.Errorf("audit with the replica not replicating: %d %s, want 404 from the primary", code, body)
		}
		return nil
	})
}
