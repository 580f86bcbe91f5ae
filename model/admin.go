package model

import (
	"fmt"
	"slices"
	"time"
)

// Account is a user as administrators see it, with how many messages the
// account holds.
type Account struct {
	User
	Messages int
}

// Limits of the administrators' listing of accounts.
const (
	DefaultAccountLimit = 20
	MaxAccountLimit     = 100
)

// AccountQuery pages through accounts, newest first.
type AccountQuery struct {
	// Match is part of the e-mail, compared as EmailKey compares
	// addresses; "" matches every account.
	Match string
	// BeforeID resumes a previous page: only accounts with smaller IDs.
	BeforeID uint64
	// Limit is the page size; zero means DefaultAccountLimit.
	Limit int
}

// PageLimit is the page size q asks for, defaulted and bounded.
func (q AccountQuery) PageLimit() int {
	return pageLimit(q.Limit, DefaultAccountLimit, MaxAccountLimit)
}

// AccountPage is one page of accounts. NextBeforeID is zero on the last
// page; a page may be short and still have a next one when the store's
// search reached its budget of work for one page.
type AccountPage struct {
	Accounts     []*Account
	NextBeforeID uint64
}

// AccountUpdate is what an administrator may change of an account; nil
// leaves a field as it is.
type AccountUpdate struct {
	Suspended *bool
	Admin     *bool
}

// Apply makes the update's changes to u and returns the audit acts they
// amount to, in the order they are logged; none when nothing changes.
func (upd AccountUpdate) Apply(u *User) []AuditAction {
	before := *u
	if upd.Suspended != nil {
		u.Suspended = *upd.Suspended
	}
	if upd.Admin != nil && *upd.Admin != u.HasRole(RoleAdmin) {
		if *upd.Admin {
			u.Roles = append(slices.Clip(u.Roles), RoleAdmin)
		} else {
			u.Roles = slices.DeleteFunc(slices.Clone(u.Roles), func(r string) bool { return r == RoleAdmin })
		}
	}
	var acts []AuditAction
	switch {
	case u.Suspended && !before.Suspended:
		acts = append(acts, AuditSuspend)
	case !u.Suspended && before.Suspended:
		acts = append(acts, AuditUnsuspend)
	}
	switch had, has := before.HasRole(RoleAdmin), u.HasRole(RoleAdmin); {
	case has && !had:
		acts = append(acts, AuditGrantAdmin)
	case had && !has:
		acts = append(acts, AuditRevokeAdmin)
	}
	return acts
}

// StopsAdministering says what an account that could administer as
// before and no longer can as after is being made ("suspended", "stripped
// of the role"), for the refusal that keeps the last administrator; ""
// when it could not, or still can.
func StopsAdministering(before, after *User) string {
	switch {
	case !before.CanAdminister() || after.CanAdminister():
		return ""
	case !after.HasRole(RoleAdmin):
		return "stripped of the role"
	}
	return "suspended"
}

// CheckWriter refuses u's write to m unless u owns it, or, for a
// deletion (moderation), can administer. Errors: ErrForbidden.
func CheckWriter(u *User, m *Message, moderation bool) error {
	switch {
	case m.OwnerID == u.ID, moderation && u.CanAdminister():
		return nil
	case moderation:
		return Errorf(ErrForbidden, "message %d belongs to another user; only its owner or an administrator may delete it", m.ID)
	}
	return Errorf(ErrForbidden, "message %d belongs to another user; only its owner may change it", m.ID)
}

// Invitation limits.
const (
	DefaultInviteLifetime = 7 * 24 * time.Hour
	MaxInviteLifetime     = 366 * 24 * time.Hour
	MaxInviteUses         = 10000
)

// Invite lets people register while registration needs an invitation:
// MaxUses accounts, until ExpiresAt. Its code is shown once, when it is
// made, and kept only as CodeHash.
type Invite struct {
	ID        uint64
	CodeHash  TokenHash
	MaxUses   int
	Uses      int
	CreatedAt time.Time
	ExpiresAt time.Time
	CreatedBy uint64 // the administrator's account; zero: the server's machine
}

// Validate reports every rule the invitation's administrator-set fields
// break, at now.
func (inv *Invite) Validate(now time.Time) error {
	var v ValidationError
	if inv.MaxUses < 1 || inv.MaxUses > MaxInviteUses {
		v.Add("maxUses", fmt.Sprintf("must be from 1 to %d", MaxInviteUses))
	}
	switch {
	case !inv.ExpiresAt.After(now):
		v.Add("expiresAt", "must be in the future")
	case inv.ExpiresAt.After(now.Add(MaxInviteLifetime)):
		v.Add("expiresAt", "must be at most a year from now")
	}
	return v.Err()
}

// Usable reports whether the invitation still lets someone register at
// now.
func (inv *Invite) Usable(now time.Time) bool {
	return inv.Uses < inv.MaxUses && now.Before(inv.ExpiresAt)
}

// DefaultResetLifetime is how long a password-reset code works.
const DefaultResetLifetime = 24 * time.Hour

// PasswordReset lets the holder of its code set a new password for the
// account UserID, once, until ExpiresAt. The code is shown once, to the
// administrator who made it, and kept only as CodeHash.
type PasswordReset struct {
	UserID    uint64
	CodeHash  TokenHash
	CreatedAt time.Time
	ExpiresAt time.Time
}

// AuditAction names an administrative act.
type AuditAction string

// The administrative acts the audit log records.
const (
	AuditSuspend        AuditAction = "suspend"
	AuditUnsuspend      AuditAction = "unsuspend"
	AuditGrantAdmin     AuditAction = "grant-admin"
	AuditRevokeAdmin    AuditAction = "revoke-admin"
	AuditDeleteAccount  AuditAction = "delete-account"
	AuditDeleteMessages AuditAction = "delete-messages"
	AuditDeleteMessage  AuditAction = "delete-message"
	AuditPasswordReset  AuditAction = "password-reset"
	AuditCreateInvite   AuditAction = "create-invite"
	AuditRevokeInvite   AuditAction = "revoke-invite"
	AuditDownloadBackup AuditAction = "download-backup"
	AuditUpdateSettings AuditAction = "settings-update"
)

// AuditEntry is one administrative act: who, when, what and on whom.
type AuditEntry struct {
	ID     uint64
	At     time.Time
	Action AuditAction
	// ActorID and ActorEmail are the administrator who acted; zero and
	// empty for an act made on the server's machine (herald admin).
	ActorID    uint64
	ActorEmail string
	// The act's target: an account (UserID and the e-mail it had), a
	// message, an invitation; zero when the act has none of that kind.
	UserID    uint64
	UserEmail string
	MessageID uint64
	InviteID  uint64
	// Count is how many messages a delete-messages act removed.
	Count int
	// Settings are the settings a settings-update changed, with their new
	// values; nil for other acts.
	Settings Settings
}

// Limits of the audit log's pages.
const (
	DefaultAuditLimit = 50
	MaxAuditLimit     = 200
)

// AuditQuery pages through the audit log, newest first.
type AuditQuery struct {
	BeforeID uint64 // only entries with smaller IDs
	Limit    int    // zero means DefaultAuditLimit
}

// PageLimit is the page size q asks for, defaulted and bounded.
func (q AuditQuery) PageLimit() int { return pageLimit(q.Limit, DefaultAuditLimit, MaxAuditLimit) }

// AuditPage is one page of the audit log; NextBeforeID is zero on the
// last page.
type AuditPage struct {
	Entries      []*AuditEntry
	NextBeforeID uint64
}
