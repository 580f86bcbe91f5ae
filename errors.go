package main

import (
	"errors"
	"fmt"
	"os"

	"herald/bolt"
)

// errLegacyAdmins refuses --admins where there is nothing to upgrade.
var errLegacyAdmins = errors.New("--admins (HERALD_ADMINS) is no longer read: administrators are stored with their accounts. Remove it, and make administrators with herald admin grant|create --db FILE EMAIL while the server is stopped")

// plainError words the errors an operator meets most in one line that says
// what to do.
func plainError(err error) string {
	// Every case below names a file; without one, the error says it best.
	var pe *os.PathError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	switch {
	case errors.Is(err, bolt.ErrLocked):
		return fmt.Sprintf("the database %s is in use by another process (a running herald?); stop it first", pe.Path)
	case errors.Is(err, bolt.ErrNotHerald):
		return fmt.Sprintf("%s is not a Herald database; point --db at a Herald file", pe.Path)
	case errors.Is(err, bolt.ErrLegacyAdmins):
		return errLegacyAdmins.Error()
	case errors.Is(err, bolt.ErrNeedsUpgrade):
		return fmt.Sprintf("%s was written by an older Herald: start herald on it once to upgrade it (with --admins, if the old release was started with it), then run this again", pe.Path)
	case errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("%s does not exist (is its directory there?)", pe.Path)
	case errors.Is(err, os.ErrPermission):
		return fmt.Sprintf("no permission to open %s", pe.Path)
	}
	return err.Error()
}
