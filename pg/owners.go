package pg

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// Pages of messages carry their owners' e-mail addresses, and joining users
// to every row of a page is as much of PostgreSQL's work as the page itself
// (docs/performance.md, "PostgreSQL: owners' addresses kept"). A message
// read by its ID keeps the join, which for one row costs no more than the
// addresses kept would save. An account's address never changes and its ID
// is never given to another account, so an address once read is true for as
// long as the account lives: each instance keeps the addresses it has read,
// and a page reads from users only the owners it does not know, in a second
// statement.

// ownerEmailsKept bounds the addresses an instance keeps (at most a few
// megabytes); when it is full, an eighth of them make room.
const ownerEmailsKept = 1 << 15

// ownerEmails is an instance's owner ID → e-mail address.
type ownerEmails struct {
	mu sync.RWMutex
	m  map[uint64]string
}

// fill sets the address of every message in msgs whose owner is known and
// returns the owners that are not, each once.
func (o *ownerEmails) fill(msgs []*model.Message) (unknown []int64) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for _, m := range msgs {
		email, ok := o.m[m.OwnerID]
		if ok {
			m.OwnerEmail = email
			continue
		}
		if id := int64(m.OwnerID); !containsID(unknown, id) {
			unknown = append(unknown, id)
		}
	}
	return unknown
}

func containsID(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func (o *ownerEmails) put(emails map[uint64]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = make(map[uint64]string)
	}
	if len(o.m)+len(emails) > ownerEmailsKept {
		drop := max(ownerEmailsKept/8, len(o.m)+len(emails)-ownerEmailsKept)
		for id := range o.m {
			if drop == 0 {
				break
			}
			delete(o.m, id)
			drop--
		}
	}
	for id, email := range emails {
		o.m[id] = email
	}
}

// fillOwners sets the owners' addresses of msgs, reading those this
// instance does not know, and returns msgs without the messages whose
// owner has since been deleted: the account and its messages went in one
// transaction after the page was read, as if the page had been read a
// moment later.
func (db *DB) fillOwners(ctx context.Context, msgs []*model.Message) ([]*model.Message, error) {
	unknown := db.owners.fill(msgs)
	if len(unknown) == 0 {
		return msgs, nil
	}
	read := make(map[uint64]string, len(unknown))
	err := db.readTogether(ctx, func(b *pgx.Batch) {
		b.Queue(`SELECT id, email FROM users WHERE id = ANY($1)`, unknown)
	}, func(br pgx.BatchResults) error {
		clear(read)
		rows, err := br.Query()
		if err != nil {
			return err
		}
		defer rows.Close()
		var (
			id    int64
			email string
		)
		for rows.Next() {
			if err := scanWire(rows, &id, &email); err != nil {
				return err
			}
			read[uint64(id)] = email
		}
		return rows.Err()
	})
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	db.owners.put(read)
	kept := msgs[:0]
	for _, m := range msgs {
		if containsID(unknown, int64(m.OwnerID)) {
			email, ok := read[m.OwnerID]
			if !ok {
				continue
			}
			m.OwnerEmail = email
		}
		kept = append(kept, m)
	}
	return kept, nil
}
