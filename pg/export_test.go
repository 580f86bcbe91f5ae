package pg

import (
	"context"

	"herald/model"
)

// SearchSpan is searchSpan, for tests that build a worst case beyond it.
var SearchSpan = searchSpan

// CreateBatch writes creates as one group commit does, for tests that
// need a batch of a known make-up.
func (db *DB) CreateBatch(ctx context.Context, by []model.Caller, contents []string) ([]*model.Message, []error, error) {
	ops := make([]*createOp, len(by))
	for i := range by {
		ops[i] = &createOp{by: by[i], content: contents[i], terms: model.SortedTerms(contents[i])}
	}
	results, err := db.createBatch(ctx, ops)
	if err != nil {
		return nil, nil, err
	}
	msgs := make([]*model.Message, len(results))
	errs := make([]error, len(results))
	for i, r := range results {
		msgs[i], errs[i] = r.m, r.err
	}
	return msgs, errs, nil
}

// Migrations is the schema's migrations, for tests that build a database
// as an older Herald left it.
var Migrations = migrations
