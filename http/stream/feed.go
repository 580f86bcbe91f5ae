package stream

import (
	"context"

	"herald/model"
)

// Feed is a store's change log, read in commit order: what the stream
// sends, and how it learns of revoked tokens. The log is the truth; the
// wake-up only saves waiting. It answers each change of a message as the
// message is now (see model.Change): the hub's window renders changes as
// they committed where the store still has them (RecentChangesAfter), and
// sends a stream resuming each message as it is now.
type Feed interface {
	// ChangeHead returns the newest committed change's position (0 for an
	// empty log) and a channel closed once a newer change commits.
	ChangeHead(ctx context.Context) (head uint64, changed <-chan struct{}, err error)
	// ChangesAfter returns up to max changes after position after, oldest
	// first, and the head as the read saw it. Errors:
	// model.ErrChangeUnknown for a position the log does not hold (trimmed
	// away, or never given out). The changes may be shared with other
	// readers and must not be modified.
	ChangesAfter(ctx context.Context, after uint64, max int) ([]*model.Change, uint64, error)
	// RecentChangesAfter is ChangesAfter, but the changes the store still
	// holds in memory as they committed come so: what live streams are
	// sent, though an edit or a deletion committed since has scrubbed the
	// log's copy. Where the store holds them no more, they come as from
	// ChangesAfter.
	RecentChangesAfter(ctx context.Context, after uint64, max int) ([]*model.Change, uint64, error)
}

// Tokens checks that a stream's token still works, and that the authors
// of the messages a resuming stream replays still have their accounts.
type Tokens interface {
	// Authenticate finds the account a token belongs to. Errors:
	// model.ErrUnauthorized when the token no longer works.
	Authenticate(ctx context.Context, token model.TokenHash) (*model.User, *model.Token, error)
	// MissingUsers returns those of ids that name no account (deleted,
	// or never made), in the order given, each as often as given.
	MissingUsers(ctx context.Context, ids []uint64) ([]uint64, error)
}
