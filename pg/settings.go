package pg

import (
	"context"
	"maps"

	"github.com/jackc/pgx/v5"

	"herald/model"
)

// The settings an administrator changes at run time: a row a setting, its
// value's text by its name. A setting with no row takes the server's flag.

// Settings returns the settings the database holds.
func (db *DB) Settings(ctx context.Context) (_ model.Settings, err error) {
	ctx, end := db.call(ctx, &err)
	defer end()
	rows, err := db.pool.Query(ctx, `SELECT name, value FROM settings`)
	if err != nil {
		return nil, err
	}
	return collectSettings(rows)
}

func collectSettings(rows pgx.Rows) (model.Settings, error) {
	defer rows.Close()
	out := make(model.Settings)
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		out[name] = value
	}
	return out, rows.Err()
}

// UpdateSettings stores those of changes whose values differ from the
// stored ones and returns the settings held after. An update that changes
// something is written to the audit log, with what it changed, and to the
// change log, whose notification wakes every instance; one that changes
// nothing writes nothing. Updates take turns (the table's lock), so each
// one's audit entry names what it changed. Errors: model.ErrForbidden (not
// an administrator), model.ErrInvalid (a name that is no setting, a value
// empty or too long).
func (db *DB) UpdateSettings(ctx context.Context, by model.Caller, changes model.Settings) (_ model.Settings, err error) {
	if err := model.ValidateSettingsStored(changes); err != nil {
		return nil, err
	}
	ctx, end := db.call(ctx, &err)
	defer end()
	var out model.Settings
	err = db.write(ctx, func(w *writeTx) error {
		actor, err := w.admin(ctx, by)
		if err != nil {
			return err
		}
		// Readers are not held up: SHARE ROW EXCLUSIVE conflicts with
		// writers of the table only.
		if _, err := w.Exec(ctx, `LOCK TABLE settings IN SHARE ROW EXCLUSIVE MODE`); err != nil {
			return err
		}
		rows, err := w.Query(ctx, `SELECT name, value FROM settings`)
		if err != nil {
			return err
		}
		if out, err = collectSettings(rows); err != nil {
			return err
		}
		changed := out.Changes(changes)
		if len(changed) == 0 {
			return nil
		}
		for name, value := range changed {
			if _, err := w.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2)
				ON CONFLICT (name) DO UPDATE SET value = excluded.value`, name, value); err != nil {
				return err
			}
		}
		maps.Copy(out, changed)
		if err := w.audit(ctx, actor, &model.AuditEntry{Action: model.AuditUpdateSettings, Settings: changed}); err != nil {
			return err
		}
		w.changes = append(w.changes, &model.Change{Kind: model.SettingsChanged})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
