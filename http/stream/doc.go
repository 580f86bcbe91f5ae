// Package stream serves the live stream, GET /api/messages/stream:
// Server-Sent Events of a store's change log (Feed) through the filters of
// search.
//
// Fan-out without a copy, or a waiting goroutine, per subscriber: the hub
// renders each change once into the bytes of its event and keeps the
// newest of them in one shared, append-only window (window.go, event.go).
// A stream's request is admitted within the limits (hub.go), catches up
// (from the log itself when it resumes from long ago: catchup.go), then
// takes the connection from net/http and hands it to the hub (serve.go).
// One dispatcher goroutine then serves every stream in rounds
// (dispatch.go): after a commit it gives each stream the events its filter
// passes (filter.go), all of them in one write, on a goroutine that lives
// for that write only. Commits closer together than the gap between rounds
// share a round, so a busy log costs a write per stream per round rather
// than per change; the gap widens when writes take long (roundGap).
// Nobody waits for anybody: a client that stops reading only falls behind,
// and is cut off once it is MaxLag changes behind or one write has taken
// WriteTimeout.
//
// The log also says when an account's tokens were revoked, as it says
// when messages change, so a store shared by several processes ends the
// streams of a revoked token in every one of them.
package stream
