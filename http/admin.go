package http

import (
	"net/http"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"
)

// backup answers GET /api/admin/backup: a consistent snapshot of the live
// database, streamed while writers go on, from a store that can copy
// itself (HotBackup). The copy holds exactly the writes committed before
// it began.
func (s *Server) backup(w http.ResponseWriter, r *http.Request, _ httprouter.Params) error {
	hot, ok := s.store.(HotBackup)
	if !ok {
		return errNoHotBackup
	}
	// A large file takes longer to send than the server's write timeout
	// allows an ordinary answer.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Hour))
	name := "herald-backup-" + time.Now().UTC().Format("20060102T150405Z") + ".db"
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", `attachment; filename="`+name+`"`)
	n, err := hot.WriteBackup(r.Context(), w)
	if err != nil {
		if n == 0 {
			return err // nothing sent yet: still room for a problem document
		}
		// Headers and part of the file are out; all that is left is to
		// cut the connection so the client sees a broken download.
		s.log.ErrorContext(r.Context(), "backup stopped midway", "bytes", n, "err", err)
		panic(http.ErrAbortHandler)
	}
	s.log.InfoContext(r.Context(), "backup sent", "bytes", strconv.FormatInt(n, 10))
	return nil
}
