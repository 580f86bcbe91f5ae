package bolt

import (
	"context"
	"maps"

	bbolt "go.etcd.io/bbolt"

	"herald/model"
)

// The settings an administrator changes at run time: one record a
// setting, its name the key and its value's text the record. A setting
// with no record takes the server's flag.

// Settings returns the settings the database holds.
func (db *DB) Settings(_ context.Context) (model.Settings, error) {
	var out model.Settings
	err := db.bolt.View(func(tx *bbolt.Tx) error {
		out = readSettings(tx)
		return nil
	})
	return out, err
}

func readSettings(tx *bbolt.Tx) model.Settings {
	out := make(model.Settings)
	_ = tx.Bucket(bucketSettings).ForEach(func(k, v []byte) error {
		out[string(k)] = string(v)
		return nil
	})
	return out
}

// UpdateSettings stores those of changes whose values differ from the
// stored ones and returns the settings held after. An update that changes
// something is written to the audit log, with what it changed, and to the
// change log, which wakes every process that follows it; one that changes
// nothing writes nothing. Errors: model.ErrForbidden (not an
// administrator), model.ErrInvalid (a name that is no setting, a value
// empty or too long).
func (db *DB) UpdateSettings(_ context.Context, by model.Caller, changes model.Settings) (model.Settings, error) {
	if err := model.ValidateSettingsStored(changes); err != nil {
		return nil, err
	}
	var out model.Settings
	err := db.writes.update(func(tx *bbolt.Tx) error {
		actor, err := db.admin(tx, by)
		if err != nil {
			return err
		}
		out = readSettings(tx)
		changed := out.Changes(changes)
		if len(changed) == 0 {
			return nil
		}
		b := tx.Bucket(bucketSettings)
		for name, value := range changed {
			if err := b.Put([]byte(name), []byte(value)); err != nil {
				return err
			}
		}
		maps.Copy(out, changed)
		if err := db.appendAudit(tx, actor, &model.AuditEntry{Action: model.AuditUpdateSettings, Settings: changed}); err != nil {
			return err
		}
		return db.appendChange(tx, &model.Change{Kind: model.SettingsChanged})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
