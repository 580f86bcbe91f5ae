// Package netquirk is the one place Herald leans on what net/http does but
// does not promise: speed-ups that work because of how the standard
// library is built today, not because of its documented API. Each reliance
// is named here and has a test in this package that fails when a Go
// release changes it, so an upgrade of Go breaks a test, not the server.
//
//   - net/http writes a response through a 4 KiB buffer per connection
//     (ConnBufferSize), and writes a full buffer only from the middle of a
//     larger write: CoalesceWrites holds such a write back to send it with
//     what follows, one write(2) instead of two (TestWriteBufferSize).
//   - While a handler runs, net/http watches for the client leaving with a
//     read of one byte, and waits for the next request with a larger read:
//     only the larger read releases a held write (TestBackgroundRead).
//   - A handler that sets "Transfer-Encoding: identity" gets a response
//     with no chunk framing and no such header, which net/http closes
//     after the handler (UnframedBody).
//   - Hijacking a response whose status has been written sends the status
//     and headers before the connection is handed over (TakeOver); both
//     are checked by TestTakeOver.
package netquirk
