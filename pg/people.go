package pg

import (
	"context"
	"errors"
	"time"

	"herald/model"
)

// errPeopleMissing: replies, mentions and notifications are built for
// bbolt first; these placeholders keep the branch building until
// PostgreSQL's are written, and this file does not reach main.
var errPeopleMissing = errors.New("pg: replies and notifications are not written yet")

func (db *DB) PostMessage(ctx context.Context, by model.Caller, draft model.Draft, key *model.IdempotencyKey) (*model.Message, error) {
	if draft.ReplyTo != 0 {
		return nil, errPeopleMissing
	}
	return db.create(ctx, by, draft.Content, key)
}

func (db *DB) Replies(context.Context, model.Caller, model.RepliesQuery) (*model.RepliesPage, error) {
	return nil, errPeopleMissing
}

func (db *DB) Notifications(context.Context, model.Caller, model.NotificationQuery) (*model.NotificationPage, error) {
	return nil, errPeopleMissing
}

func (db *DB) MarkNotificationsRead(context.Context, model.Caller, uint64) error {
	return errPeopleMissing
}

func (db *DB) TrimNotifications(context.Context, time.Duration) (int, error) {
	return 0, errPeopleMissing
}
