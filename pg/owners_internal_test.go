package pg

import (
	"fmt"
	"testing"

	"herald/model"
)

// The owners kept stay within ownerEmailsKept however many owners are
// read, and the ones just read are kept.
func TestOwnerEmailsBounded(t *testing.T) {
	var o ownerEmails
	for batch := range 40 {
		read := map[uint64]ownerCard{}
		for i := range 1000 {
			id := uint64(batch*1000 + i + 1)
			read[id] = ownerCard{email: fmt.Sprintf("u%d@example.com", id), handle: fmt.Sprintf("u%d", id)}
		}
		_, gen := o.fill(nil)
		o.put(read, gen)
		if len(o.m) > ownerEmailsKept {
			t.Fatalf("after %d owners, %d kept", (batch+1)*1000, len(o.m))
		}
		msgs := []*model.Message{{OwnerID: uint64(batch*1000 + 1)}, {OwnerID: uint64(batch*1000 + 1000)}}
		if unknown, _ := o.fill(msgs); len(unknown) != 0 || msgs[1].OwnerEmail != fmt.Sprintf("u%d@example.com", batch*1000+1000) ||
			msgs[1].OwnerHandle != fmt.Sprintf("u%d", batch*1000+1000) {
			t.Fatalf("batch %d: unknown %v, owner %q @%s", batch, unknown, msgs[1].OwnerEmail, msgs[1].OwnerHandle)
		}
	}
	if unknown, _ := o.fill([]*model.Message{{OwnerID: 1 << 40}, {OwnerID: 1 << 40}}); len(unknown) != 1 {
		t.Errorf("an owner never read, twice on a page: unknown %v, want it once", unknown)
	}
}

// An owner read before it was forgotten (its name changed meanwhile) is
// not kept: the next page reads it again.
func TestOwnerForgottenDuringRead(t *testing.T) {
	var o ownerEmails
	msgs := []*model.Message{{OwnerID: 7}}
	unknown, gen := o.fill(msgs)
	if len(unknown) != 1 {
		t.Fatalf("unknown = %v", unknown)
	}
	o.forget(7) // the name changed while the page read it
	o.put(map[uint64]ownerCard{7: {email: "ada@example.com", name: "Old Name"}}, gen)
	if unknown, _ := o.fill(msgs); len(unknown) != 1 {
		t.Errorf("an owner read before it was forgotten was kept: %+v", msgs[0])
	}
	_, gen = o.fill(msgs)
	o.put(map[uint64]ownerCard{7: {email: "ada@example.com", name: "New Name"}}, gen)
	if unknown, _ := o.fill(msgs); len(unknown) != 0 || msgs[0].OwnerName != "New Name" {
		t.Errorf("an owner read after: unknown %v, %+v", unknown, msgs[0])
	}
	o.forgetAll()
	if unknown, _ := o.fill(msgs); len(unknown) != 1 {
		t.Error("forgetAll kept an owner")
	}
}
