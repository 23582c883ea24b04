package rooms

import (
	"context"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// TestRecordsSetReadsMovesTheAuditTrail: after SetReads, the audit trail
// (Records.Audit and the Service's) reads the reads pool, here another
// database standing in for a replica: the room and its row are only
// there.
func TestRecordsSetReadsMovesTheAuditTrail(t *testing.T) {
	primary, reads := testenv.NewDB(t), testenv.NewDB(t)
	ctx := context.Background()
	testenv.Exec(t, reads, `INSERT INTO rooms (app_code, room_id, room_short_id, owner_user_id, status, visible_region_id,
		mode, room_version, created_at_ms, updated_at_ms) VALUES ('a1', 'r1', 's1', 7, 'active', 1, 'voice', 1, 1, 1)`)
	if _, err := InsertAudit(ctx, reads, AuditEntry{AppCode: "a1", RoomID: "r1", Operator: "admin:op", Action: AuditBan,
		Reason: "spam", CreatedAtMs: 1}); err != nil {
		t.Fatal(err)
	}
	recs := NewRecords(primary, time.Now)
	if _, err := recs.Audit(ctx, "a1", "r1", 0, ""); err == nil {
		t.Fatal("the primary has no room r1, yet its audit was read")
	}
	recs.SetReads(reads)
	page, err := recs.Audit(ctx, "a1", "r1", 0, "")
	if err != nil || len(page.Items) != 1 || page.Items[0].Action != AuditBan {
		t.Fatalf("audit through SetReads: %+v, %v: want the reads pool's ban", page, err)
	}
	svc := &Service{store: &store{db: primary}, gifts: &giftCatalog{db: primary, now: time.Now, cache: map[giftKey]cachedGift{}}}
	svc.SetReads(reads)
	if page, err := svc.records().Audit(ctx, "a1", "r1", 0, ""); err != nil || len(page.Items) != 1 {
		t.Fatalf("the service's audit through SetReads: %+v, %v", page, err)
	}
}
