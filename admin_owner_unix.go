//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// actAsDatabaseOwner makes herald admin, run as root on a bbolt file in a
// directory another user owns (the package's /var/lib/herald is the
// herald user's), do its work as that user: the file it creates or
// changes is then one the service, which runs as that user, can open.
// Root would otherwise create a file only root can open. A file there
// that another user owns already, the service could not open either: it
// is refused, with the command that gives it back. It says so on note.
func actAsDatabaseOwner(path string, note io.Writer) error {
	if os.Geteuid() != 0 {
		return nil
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return nil // opening the file says what is wrong
	}
	owner, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || owner.Uid == 0 {
		return nil
	}
	who := ownerName(owner.Uid, owner.Gid)
	if fi, err := os.Stat(path); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != owner.Uid {
			return fmt.Errorf("%s belongs to %s, but its directory, and so the service, to %s, who could not open it; give it back first: chown %s %s",
				path, ownerName(st.Uid, st.Gid), who, who, shellQuote(path))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// Groups first, and the user last: once it is dropped, root's rights
	// to change the rest are gone. Go applies each to every thread.
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("acting as %s, the owner of %s: %w", who, dir, err)
	}
	if err := syscall.Setgid(int(owner.Gid)); err != nil {
		return fmt.Errorf("acting as %s, the owner of %s: %w", who, dir, err)
	}
	if err := syscall.Setuid(int(owner.Uid)); err != nil {
		return fmt.Errorf("acting as %s, the owner of %s: %w", who, dir, err)
	}
	fmt.Fprintf(note, "herald admin: acting as %s, the owner of %s, so that the service can open the database\n", who, dir)
	return nil
}

// ownerName is user:group by their names where they have them.
func ownerName(uid, gid uint32) string {
	u, g := strconv.FormatUint(uint64(uid), 10), strconv.FormatUint(uint64(gid), 10)
	if found, err := user.LookupId(u); err == nil {
		u = found.Username
	}
	if found, err := user.LookupGroupId(g); err == nil {
		g = found.Name
	}
	return u + ":" + g
}
