package http

import (
	"context"
	"io"
	"time"

	"herald/auth"
	"herald/http/stream"
	"herald/model"
)

// What the handlers ask of storage, declared here where it is used, in
// small interfaces grouped by concern. main wires a store in; this package
// imports none. Every method takes the request's context, and every
// operation made for a client takes the model.Caller it is made for, which
// the store resolves inside the operation's own transaction.
//
// A store says itself when its database fails under a call, as one of
// model's kinds: model.ErrUnavailable when nothing was done (the database
// out of reach, or not answering within the store's deadline), and
// model.ErrOutcomeUnknown for a write that may have been done, its answer
// lost. Nothing here guesses at a driver's errors.

// Store is every interface the handlers use.
type Store interface {
	Accounts
	Messages
	Administration
	Settings
	stream.Feed
	Health
	PushSubscriptions
}

// PushSubscriptions keeps Web Push's key pair and the accounts' browser
// subscriptions (the sender, package push, asks the rest).
type PushSubscriptions interface {
	// VAPIDKeys returns the stored key pair, storing the one generate
	// makes when there is none yet; every caller, on every instance,
	// gets the one stored first.
	VAPIDKeys(ctx context.Context, generate func() (model.VAPIDKeys, error)) (model.VAPIDKeys, error)
	// SavePushSubscription stores sub for the caller: a new one, the
	// caller's own endpoint updated, or another account's endpoint moved
	// to the caller; created is false for an update. It sets sub's ID,
	// UserID, CreatedAt and LastSuccessAt. Errors: model.ErrConflict
	// (model.PushSubscriptionLimit).
	SavePushSubscription(ctx context.Context, by model.Caller, sub *model.PushSubscription) (created bool, err error)
	// PushSubscriptions lists the caller's subscriptions, newest first.
	PushSubscriptions(ctx context.Context, by model.Caller) ([]*model.PushSubscription, error)
	// DeletePushSubscription deletes the caller's subscription. Errors:
	// model.ErrNotFound when the caller holds none with that ID.
	DeletePushSubscription(ctx context.Context, by model.Caller, id uint64) error
}

// Settings are what an administrator changes at run time, kept in the
// store so that every instance follows them (see followSettings).
type Settings interface {
	// Settings returns the settings the database holds; one it holds no
	// value for is absent.
	Settings(ctx context.Context) (model.Settings, error)
	// UpdateSettings stores those of changes whose values differ from the
	// stored ones and returns the settings held after. One that changes
	// something writes an audit entry naming what it changed and a
	// model.SettingsChanged change to the log, in its transaction; one
	// that changes nothing writes nothing. Errors: model.ErrForbidden,
	// model.ErrInvalid (see model.ValidateSettingsStored).
	UpdateSettings(ctx context.Context, by model.Caller, changes model.Settings) (model.Settings, error)
}

// Accounts keeps accounts and their tokens.
type Accounts interface {
	// CreateUser stores a new account with model.RoleUser alone and its
	// first token, in one transaction, and sets u's ID, Roles and
	// CreatedAt. With invite, the hash of an invitation's code, the
	// invitation is checked and one of its uses taken in the same
	// transaction. Errors: model.ErrInvalid (model.InviteRefused for an
	// invitation that is unknown, used up, revoked or expired),
	// model.ErrConflict (the e-mail is taken, in any letter case).
	CreateUser(ctx context.Context, u *model.User, token model.TokenHash, ttl time.Duration, invite *model.TokenHash) (*model.Token, error)
	// UserByEmail finds an account by e-mail in any letter case. Errors:
	// model.ErrNotFound.
	UserByEmail(ctx context.Context, email string) (*model.User, error)
	// MissingUsers returns those of ids that name no account (deleted,
	// or never made), in the order given, each as often as given.
	MissingUsers(ctx context.Context, ids []uint64) ([]uint64, error)
	// IssueLoginToken issues a token to a login whose password was checked
	// against checkedHash, unless the account's hash has changed since
	// (or the account is gone). Errors: model.ErrUnauthorized,
	// model.ErrForbidden (the account is suspended).
	IssueLoginToken(ctx context.Context, userID uint64, checkedHash string, token model.TokenHash, ttl time.Duration) (*model.Token, error)
	// SetPasswordHash replaces an account's hash with one of newer
	// parameters, unless it is no longer oldHash.
	SetPasswordHash(ctx context.Context, userID uint64, oldHash, hash string) error
	// Authenticate finds the account a token belongs to. Errors:
	// model.ErrUnauthorized (unknown, revoked, expired).
	Authenticate(ctx context.Context, token model.TokenHash) (*model.User, *model.Token, error)
	// Tokens lists the account's working tokens, newest first.
	Tokens(ctx context.Context, userID uint64) ([]*model.Token, error)
	// RevokeToken deletes one token. Errors: model.ErrNotFound.
	RevokeToken(ctx context.Context, token model.TokenHash) error
	// RevokeTokenByID deletes the caller's token with that handle. Errors:
	// model.ErrNotFound (the caller holds no such token).
	RevokeTokenByID(ctx context.Context, by model.Caller, id model.TokenID) error
	// RevokeAllTokens deletes every token of the caller.
	RevokeAllTokens(ctx context.Context, by model.Caller) error
	// ChangePassword stores the caller's new hash and deletes every other
	// token of theirs, in one transaction.
	ChangePassword(ctx context.Context, by model.Caller, hash string) error
	// UpdateProfile changes the caller's handle and name as the update
	// says and returns the account. Errors: model.ErrInvalid,
	// model.ErrConflict (model.HandleTaken).
	UpdateProfile(ctx context.Context, by model.Caller, p model.ProfileUpdate) (*model.User, error)
	// UserByHandle finds the account with a handle, in any letter case,
	// suspended or not. Errors: model.ErrNotFound.
	UserByHandle(ctx context.Context, handle string) (*model.User, error)
	// DeleteAccount deletes the caller's account, tokens and messages.
	// Errors: model.ErrConflict when the caller is the last administrator.
	DeleteAccount(ctx context.Context, by model.Caller) error
	// PasswordReset finds the reset a code's hash belongs to. Errors:
	// model.ErrInvalid (model.ResetCodeRefused: unknown, used or expired).
	PasswordReset(ctx context.Context, code model.TokenHash) (*model.PasswordReset, error)
	// ResetPassword stores hash as the password of the account a reset
	// code is for, uses the code up and deletes every token of the
	// account, in one transaction. Errors: as PasswordReset.
	ResetPassword(ctx context.Context, code model.TokenHash, hash string) error
}

// Messages keeps messages and searches them.
type Messages interface {
	// CreateMessage stores content as a new message of the caller's.
	// Errors: model.ErrInvalid, model.ErrUnauthorized.
	CreateMessage(ctx context.Context, by model.Caller, content string) (*model.Message, error)
	// CreateMessageWithKey is CreateMessage made with an Idempotency-Key:
	// when the caller's record of key, written by a create within
	// model.IdempotencyWindow, matches key's fingerprint, it returns the
	// message that create made as its answer showed it (with content,
	// which the fingerprint shows is the same) and writes nothing;
	// otherwise it creates the message and the key's record in one
	// transaction. Errors: as CreateMessage, and model.ErrKeyReused when
	// the record's fingerprint is another request's.
	CreateMessageWithKey(ctx context.Context, by model.Caller, content string, key model.IdempotencyKey) (*model.Message, error)
	// Message reads a message for the caller and returns the caller's
	// account with it. Errors: model.ErrUnauthorized, model.ErrNotFound.
	Message(ctx context.Context, by model.Caller, id uint64) (*model.User, *model.Message, error)
	// UpdateMessage changes the caller's message if pre holds. Errors:
	// model.ErrInvalid, model.ErrUnauthorized, model.ErrNotFound,
	// model.ErrForbidden (not the owner), model.ErrPrecondition.
	UpdateMessage(ctx context.Context, id uint64, by model.Caller, upd model.MessageUpdate, pre model.Precondition) (*model.Message, error)
	// DeleteMessage deletes the caller's message if pre holds and returns
	// it as it was; an administrator may delete anyone's, which the audit
	// log records. Errors: as UpdateMessage.
	DeleteMessage(ctx context.Context, id uint64, by model.Caller, pre model.Precondition) (*model.Message, error)
	// PostMessage stores draft as a new message of the caller's, made
	// with key as CreateMessageWithKey, or without (nil): a reply when
	// draft.ReplyTo is set, with its mentions resolved and the
	// notifications it causes written in the same transaction. Errors: as
	// CreateMessageWithKey, and model.ErrInvalid naming replyTo when the
	// message it answers does not exist.
	PostMessage(ctx context.Context, by model.Caller, draft model.Draft, key *model.IdempotencyKey) (*model.Message, error)
	// Replies returns a page of the replies to a message, oldest first;
	// a deleted message's are still listed. Errors:
	// model.ErrUnauthorized, model.ErrNotFound when the message does not
	// exist and never did.
	Replies(ctx context.Context, by model.Caller, q model.RepliesQuery) (*model.RepliesPage, error)
	// Notifications returns a page of the caller's notifications, newest
	// first, with the number unread; those whose actor is suspended or
	// gone are neither listed nor counted. Errors: model.ErrUnauthorized.
	Notifications(ctx context.Context, by model.Caller, q model.NotificationQuery) (*model.NotificationPage, error)
	// MarkNotificationsRead marks the caller's notifications up to and
	// including upTo read, every one when upTo is zero. Errors:
	// model.ErrUnauthorized.
	MarkNotificationsRead(ctx context.Context, by model.Caller, upTo uint64) error
	// SearchMessages returns a page of the query's messages, newest first,
	// and the caller's account. Errors: model.ErrInvalid,
	// model.ErrUnauthorized, the context's error when it ends.
	SearchMessages(ctx context.Context, by model.Caller, q model.SearchQuery) (*model.User, *model.SearchPage, error)
}

// Administration is what administrators do. Every method resolves its
// caller inside its own transaction and refuses anyone but an
// administrator (or model.ByServer) with model.ErrForbidden; every act
// that changes something is written to the audit log in that same
// transaction.
type Administration interface {
	// ListAccounts pages through the accounts, newest first.
	ListAccounts(ctx context.Context, by model.Caller, q model.AccountQuery) (*model.AccountPage, error)
	// Account reads one account. Errors: model.ErrNotFound.
	Account(ctx context.Context, by model.Caller, id uint64) (*model.Account, error)
	// UpdateAccount suspends or lifts a suspension (a suspension deletes
	// every token of the account), grants or revokes the administrator
	// role. Errors: model.ErrNotFound, model.ErrConflict (it would leave
	// no administrator who is not suspended).
	UpdateAccount(ctx context.Context, by model.Caller, id uint64, upd model.AccountUpdate) (*model.Account, error)
	// RemoveAccount deletes an account, its tokens and its messages, as
	// DeleteAccount does. Errors: model.ErrNotFound, model.ErrConflict
	// (the last administrator).
	RemoveAccount(ctx context.Context, by model.Caller, id uint64) error
	// RemoveMessagesOf deletes every message the account holds now and
	// returns how many. Errors: model.ErrNotFound.
	RemoveMessagesOf(ctx context.Context, by model.Caller, id uint64) (int, error)
	// CreatePasswordReset stores a reset of the account's password whose
	// code hashes to code, valid for ttl, replacing any the account had;
	// an administrator's is audited, one by model.ByServer (asked for by
	// e-mail) is not. Errors: model.ErrNotFound.
	CreatePasswordReset(ctx context.Context, by model.Caller, userID uint64, code model.TokenHash, ttl time.Duration) (*model.PasswordReset, error)
	// CreateInvite stores inv, whose MaxUses, ExpiresAt and CodeHash are
	// set, and sets its ID, Uses, CreatedAt and CreatedBy. Errors:
	// model.ErrInvalid.
	CreateInvite(ctx context.Context, by model.Caller, inv *model.Invite) error
	// Invites lists the invitations, newest first.
	Invites(ctx context.Context, by model.Caller) ([]*model.Invite, error)
	// RevokeInvite deletes an invitation. Errors: model.ErrNotFound.
	RevokeInvite(ctx context.Context, by model.Caller, id uint64) error
	// AuditLog pages through the audit log, newest first.
	AuditLog(ctx context.Context, by model.Caller, q model.AuditQuery) (*model.AuditPage, error)
	// RecordBackup writes to the audit log that the caller is downloading
	// a backup, before the copy is made, so the copy holds it.
	RecordBackup(ctx context.Context, by model.Caller) error
}

// Health tells whether the store can serve.
type Health interface {
	// Ping reports whether the store can still serve a read.
	Ping(ctx context.Context) error
	// WritesFailing returns why writes fail now, an error of kind
	// model.ErrNoSpace, or nil once a write has succeeded since.
	WritesFailing(ctx context.Context) error
}

// SharedLimits is offered by a store that several processes share and
// that can count the guessing and write limits itself, so N processes
// never allow N times the budget. It is checked for, not required:
// without it the limits are kept in this process's memory.
type SharedLimits interface {
	// Limiter returns the limiter called name, allowing rate per key. A
	// limiter that cannot reach the store should let the event through
	// (and say so in its logs) rather than lock everyone out.
	Limiter(name string, rate auth.Rate) auth.Spender
}

// HotBackup is offered by a store that can copy itself, consistently,
// while it serves: GET /api/admin/backup streams the copy. It is checked
// for, not required: a store kept by a database server is backed up with
// that server's tools.
type HotBackup interface {
	// WriteBackup writes a consistent copy of the whole store to w.
	WriteBackup(ctx context.Context, w io.Writer) (int64, error)
}
