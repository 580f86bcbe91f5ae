package storetest

import (
	"maps"
	"time"

	"herald/model"
)

// testSettings: the settings an administrator changes at run time are
// stored as given, by an administrator only; a change is audited with
// what it changed and logged as model.SettingsChanged, which wakes the
// log's readers; a change to what is stored already writes nothing.
func testSettings(e *env) {
	t := e.t
	ctx := e.ctx()
	if got, err := e.Store.Settings(ctx); err != nil || len(got) != 0 {
		t.Fatalf("Settings of an empty store = %v, %v; want none", got, err)
	}
	_, rootTok := e.admin("root@example.com")
	_, adaTok := e.user("ada@example.com")
	acts := len(e.auditActs())
	head, woken, err := e.Store.ChangeHead(ctx)
	if err != nil {
		t.Fatal(err)
	}

	_, err = e.Store.UpdateSettings(ctx, model.ByToken(adaTok), model.Settings{model.SettingRegistration: "closed"})
	wantKind(t, "UpdateSettings by a user", err, model.ErrForbidden, "")
	for _, bad := range []model.Settings{{"colour": "blue"}, {model.SettingRegistration: ""}} {
		_, err := e.Store.UpdateSettings(ctx, model.ByToken(rootTok), bad)
		wantKind(t, "UpdateSettings of an unknown name or an empty value", err, model.ErrInvalid, "")
	}
	if got, _ := e.Store.Settings(ctx); len(got) != 0 || len(e.auditActs()) != acts {
		t.Fatalf("after refused updates: settings %v, audit %v", got, e.auditActs())
	}

	want := model.Settings{model.SettingRegistration: "invite", model.SettingWritesPerAccount: "10/1m"}
	got, err := e.Store.UpdateSettings(ctx, model.ByToken(rootTok), want)
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("UpdateSettings = %v, %v; want %v", got, err, want)
	}
	if got, err := e.Store.Settings(ctx); err != nil || !maps.Equal(got, want) {
		t.Fatalf("Settings = %v, %v; want %v", got, err, want)
	}
	select {
	case <-woken:
	case <-time.After(10 * time.Second):
		t.Fatal("a settings change did not wake ChangeHead's readers")
	}
	chs := e.changes(head)
	if len(chs) != 1 || chs[0].Kind != model.SettingsChanged || !chs[0].Kind.Internal() || chs[0].UserID != 0 || chs[0].Message.ID != 0 {
		t.Fatalf("changes after a settings change: %v", chs)
	}
	entry := e.newestAudit()
	if entry.Action != model.AuditUpdateSettings || entry.ActorEmail != "root@example.com" || !maps.Equal(entry.Settings, want) {
		t.Errorf("audit entry = %+v, want settings-update by root of %v", entry, want)
	}

	// Only what differs is changed, and audited.
	head = chs[0].Seq
	got, err = e.Store.UpdateSettings(ctx, model.ByToken(rootTok), model.Settings{model.SettingRegistration: "invite", model.SettingWritesPerAccount: "5/1s"})
	want[model.SettingWritesPerAccount] = "5/1s"
	if err != nil || !maps.Equal(got, want) {
		t.Fatalf("UpdateSettings = %v, %v; want %v", got, err, want)
	}
	if entry := e.newestAudit(); !maps.Equal(entry.Settings, model.Settings{model.SettingWritesPerAccount: "5/1s"}) {
		t.Errorf("audit entry names %v, want only writesPerAccount", entry.Settings)
	}
	head = e.changes(head)[0].Seq

	// What is stored already changes nothing: no audit entry, no change.
	acts = len(e.auditActs())
	if got, err := e.Store.UpdateSettings(ctx, model.ByToken(rootTok), model.Settings{model.SettingRegistration: "invite"}); err != nil || !maps.Equal(got, want) {
		t.Fatalf("UpdateSettings to the stored value = %v, %v; want %v", got, err, want)
	}
	if n := len(e.auditActs()); n != acts {
		t.Errorf("an update that changed nothing was audited (%d entries, want %d)", n, acts)
	}
	if chs := e.changes(head); len(chs) != 0 {
		t.Errorf("an update that changed nothing was logged: %v", chs)
	}
	// Other acts' entries carry no settings.
	page, err := e.Store.AuditLog(ctx, model.ByServer(), model.AuditQuery{Limit: model.MaxAuditLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range page.Entries {
		if (a.Action == model.AuditUpdateSettings) != (a.Settings != nil) {
			t.Errorf("audit entry %d (%s) has settings %v", a.ID, a.Action, a.Settings)
		}
	}
}

// newestAudit is the audit log's newest entry.
func (e *env) newestAudit() *model.AuditEntry {
	e.t.Helper()
	page, err := e.Store.AuditLog(e.ctx(), model.ByServer(), model.AuditQuery{Limit: 1})
	if err != nil || len(page.Entries) == 0 {
		e.t.Fatalf("AuditLog = %v, %v", page, err)
	}
	return page.Entries[0]
}
