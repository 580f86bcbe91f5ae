package model

import (
	"slices"
	"testing"
)

func TestAccountUpdateApply(t *testing.T) {
	yes, no := true, false
	user := func(suspended bool, roles ...string) User { return User{ID: 7, Roles: roles, Suspended: suspended} }
	for _, c := range []struct {
		name      string
		u         User
		upd       AccountUpdate
		acts      []AuditAction
		suspended bool
		admin     bool
		stops     string
	}{
		{"nothing", user(false, RoleUser), AccountUpdate{}, nil, false, false, ""},
		{"suspend", user(false, RoleUser), AccountUpdate{Suspended: &yes}, []AuditAction{AuditSuspend}, true, false, ""},
		{"suspend again", user(true, RoleUser), AccountUpdate{Suspended: &yes}, nil, true, false, ""},
		{"lift", user(true, RoleUser), AccountUpdate{Suspended: &no}, []AuditAction{AuditUnsuspend}, false, false, ""},
		{"grant", user(false, RoleUser), AccountUpdate{Admin: &yes}, []AuditAction{AuditGrantAdmin}, false, true, ""},
		{"grant again", user(false, RoleUser, RoleAdmin), AccountUpdate{Admin: &yes}, nil, false, true, ""},
		{"revoke", user(false, RoleUser, RoleAdmin), AccountUpdate{Admin: &no}, []AuditAction{AuditRevokeAdmin}, false, false, "stripped of the role"},
		{"suspend an administrator", user(false, RoleUser, RoleAdmin), AccountUpdate{Suspended: &yes}, []AuditAction{AuditSuspend}, true, true, "suspended"},
		{"both", user(false, RoleUser, RoleAdmin), AccountUpdate{Suspended: &yes, Admin: &no}, []AuditAction{AuditSuspend, AuditRevokeAdmin}, true, false, "stripped of the role"},
		{"revoke a suspended administrator", user(true, RoleUser, RoleAdmin), AccountUpdate{Admin: &no}, []AuditAction{AuditRevokeAdmin}, true, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := c.u
			before.Roles = slices.Clone(c.u.Roles)
			u := c.u
			acts := c.upd.Apply(&u)
			if !slices.Equal(acts, c.acts) || u.Suspended != c.suspended || u.HasRole(RoleAdmin) != c.admin || !u.HasRole(RoleUser) {
				t.Errorf("Apply = %v, %+v; want %v, suspended %v, admin %v", acts, u, c.acts, c.suspended, c.admin)
			}
			if !slices.Equal(c.u.Roles, before.Roles) {
				t.Errorf("Apply changed the roles it was given: %v", c.u.Roles)
			}
			if got := StopsAdministering(&before, &u); got != c.stops {
				t.Errorf("StopsAdministering = %q, want %q", got, c.stops)
			}
		})
	}
}

func TestCheckWriter(t *testing.T) {
	owner := &User{ID: 1, Roles: []string{RoleUser}}
	other := &User{ID: 2, Roles: []string{RoleUser}}
	admin := &User{ID: 3, Roles: []string{RoleUser, RoleAdmin}}
	suspended := &User{ID: 4, Roles: []string{RoleUser, RoleAdmin}, Suspended: true}
	m := &Message{ID: 9, OwnerID: 1}
	for _, c := range []struct {
		u          *User
		moderation bool
		ok         bool
	}{
		{owner, false, true}, {owner, true, true},
		{other, false, false}, {other, true, false},
		{admin, false, false}, {admin, true, true},
		{suspended, true, false},
	} {
		if err := CheckWriter(c.u, m, c.moderation); (err == nil) != c.ok {
			t.Errorf("CheckWriter(user %d, moderation %v) = %v, want ok %v", c.u.ID, c.moderation, err, c.ok)
		}
	}
}
