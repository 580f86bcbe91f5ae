package bolt

import (
	"context"
	"testing"
	"time"

	"herald/model"
)

// TestAuditLogTrimmed: pages newest first, trimmed by age and count.
func TestAuditLogTrimmed(t *testing.T) {
	db := mustOpen(t)
	ctx := context.Background()
	_, rootTok := mustAdmin(t, db, "root@example.com")
	for range 9 {
		db.Clock.Add(time.Hour)
		if err := db.RecordBackup(ctx, model.ByToken(rootTok)); err != nil {
			t.Fatal(err)
		}
	}
	page, err := db.AuditLog(ctx, model.ByToken(rootTok), model.AuditQuery{Limit: 4})
	if err != nil || len(page.Entries) != 4 || page.Entries[0].ID != 10 || page.NextBeforeID != 7 {
		t.Fatalf("first page = %+v next %d, %v", page.Entries, page.NextBeforeID, err)
	}
	page, err = db.AuditLog(ctx, model.ByToken(rootTok), model.AuditQuery{Limit: 4, BeforeID: 7})
	if err != nil || len(page.Entries) != 4 || page.Entries[0].ID != 6 {
		t.Fatalf("second page = %+v, %v", page.Entries, err)
	}
	if n, err := db.TrimAudit(ctx, 0, 6); err != nil || n != 4 {
		t.Errorf("TrimAudit(keep 6) = %d, %v; want 4", n, err)
	}
	if n, err := db.TrimAudit(ctx, 2*time.Hour+time.Minute, 0); err != nil || n != 3 {
		t.Errorf("TrimAudit(keep 2h) = %d, %v; want 3", n, err)
	}
	if got := len(auditActions(t, db)); got != 3 {
		t.Errorf("%d entries left, want 3", got)
	}
}
