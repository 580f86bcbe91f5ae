package model

import (
	"maps"
	"slices"
)

// The settings an administrator changes while the server runs (GET and
// PATCH /api/admin/settings), by the names the API gives them.
const (
	SettingRegistration     = "registration"     // who may register: open, invite or closed
	SettingWritesPerAccount = "writesPerAccount" // the write limit, as BURST/INTERVAL
)

// SettingNames are every setting's name, in the order the API lists them.
var SettingNames = []string{SettingRegistration, SettingWritesPerAccount}

// Settings are the settings a database holds, each by name as its value's
// text; a setting the database holds no value for is absent, and the
// server's flag gives it. Stores keep the text as given: the HTTP layer,
// which reads the values, checks them before they are stored.
type Settings map[string]string

// maxSettingBytes bounds a setting's value; every valid one is far shorter.
const maxSettingBytes = 64

// ValidateSettingsStored checks what a store is given to keep: known names
// and short, non-empty values. Errors: ErrInvalid naming the setting.
func ValidateSettingsStored(s Settings) error {
	var invalid ValidationError
	for _, name := range slices.Sorted(maps.Keys(s)) {
		switch v := s[name]; {
		case !slices.Contains(SettingNames, name):
			invalid.Add(name, "is not a setting")
		case v == "" || len(v) > maxSettingBytes:
			invalid.Add(name, "must be a value of at most 64 bytes")
		}
	}
	return invalid.Err()
}

// Changes is what of changes differs from s: the settings an update
// writes and audits.
func (s Settings) Changes(changes Settings) Settings {
	changed := make(Settings)
	for name, value := range changes {
		if s[name] != value {
			changed[name] = value
		}
	}
	return changed
}
