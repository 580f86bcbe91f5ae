package netquirk

import (
	"net"
	"net/http"
)

// UnframedBody makes the body of the response whose headers are h
// whatever is written to its connection until it closes, with no chunk
// framing, as Server-Sent Events are best sent: net/http, given
// "Transfer-Encoding: identity", writes neither chunks nor that header.
// Call it before the status is written.
func UnframedBody(h http.Header) { h.Set("Transfer-Encoding", "identity") }

// TakeOver takes the connection of a response whose status has been
// written, with its status and headers sent, from net/http. The handler
// then writes to the connection when it likes, and closes it: it holds no
// buffer and no goroutine of net/http's, and a *net.TCPConn sends
// net.Buffers in one writev(2). A write held back by CoalesceWrites is
// sent first.
func TakeOver(w http.ResponseWriter) (net.Conn, error) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, err
	}
	return underneath(conn)
}

// underneath sends what a connection taken over holds back, if it is a
// coalescingConn, and returns the connection below it.
func underneath(conn net.Conn) (net.Conn, error) {
	cc, ok := conn.(*coalescingConn)
	if !ok {
		return conn, nil
	}
	if err := cc.release(); err != nil {
		_ = cc.Conn.Close()
		return nil, err
	}
	return cc.Conn, nil
}
