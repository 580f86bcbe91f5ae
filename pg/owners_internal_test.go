package pg

import (
	"fmt"
	"testing"

	"herald/model"
)

// The addresses kept stay within ownerEmailsKept however many owners are
// read, and the ones just read are kept.
func TestOwnerEmailsBounded(t *testing.T) {
	var o ownerEmails
	for batch := range 40 {
		read := map[uint64]string{}
		for i := range 1000 {
			id := uint64(batch*1000 + i + 1)
			read[id] = fmt.Sprintf("u%d@example.com", id)
		}
		o.put(read)
		if len(o.m) > ownerEmailsKept {
			t.Fatalf("after %d owners, %d kept", (batch+1)*1000, len(o.m))
		}
		msgs := []*model.Message{{OwnerID: uint64(batch*1000 + 1)}, {OwnerID: uint64(batch*1000 + 1000)}}
		if unknown := o.fill(msgs); len(unknown) != 0 || msgs[1].OwnerEmail != fmt.Sprintf("u%d@example.com", batch*1000+1000) {
			t.Fatalf("batch %d: unknown %v, address %q", batch, unknown, msgs[1].OwnerEmail)
		}
	}
	if unknown := o.fill([]*model.Message{{OwnerID: 1 << 40}, {OwnerID: 1 << 40}}); len(unknown) != 1 {
		t.Errorf("an owner never read, twice on a page: unknown %v, want it once", unknown)
	}
}
