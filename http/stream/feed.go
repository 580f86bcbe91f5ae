package stream

import (
	"context"

	"herald/model"
)

// Feed is a store's change log, read in commit order: what the stream
// sends, and how it learns of revoked tokens. The log is the truth; the
// wake-up only saves waiting.
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
