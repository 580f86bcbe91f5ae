package netquirk

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// recordingConn is a net.Conn that keeps each Write it is given, to see
// what a coalescingConn passes on and when.
type recordingConn struct {
	net.Conn // nil: only the methods below are used
	mu       sync.Mutex
	writes   [][]byte
	closed   bool
}

func (r *recordingConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, net.ErrClosed
	}
	r.writes = append(r.writes, bytes.Clone(p))
	return len(p), nil
}

func (r *recordingConn) Read([]byte) (int, error) { return 0, io.EOF }

func (r *recordingConn) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return nil
}

func (r *recordingConn) got() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.writes
}

func filled(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

func TestCoalescingConnWrites(t *testing.T) {
	full := filled(ConnBufferSize, 'a')
	tests := []struct {
		name      string
		fullFirst bool // write a full buffer before do
		do        func(c *coalescingConn) error
		want      [][]byte // what reached the connection underneath, write by write
	}{
		{"a write of another size goes at once", false,
			func(c *coalescingConn) error { _, err := c.Write([]byte("small")); return err },
			[][]byte{[]byte("small")}},
		{"a full buffer waits for what follows", true,
			func(*coalescingConn) error { return nil },
			nil},
		{"a full buffer goes with the rest", true,
			func(c *coalescingConn) error { _, err := c.Write([]byte("rest")); return err },
			[][]byte{append(bytes.Clone(full), "rest"...)}},
		{"a rest too big to copy still follows the full buffer", true,
			func(c *coalescingConn) error {
				n, err := c.Write(filled(3*ConnBufferSize, 'b'))
				if err == nil && n != 3*ConnBufferSize {
					err = fmt.Errorf("wrote %d, want %d", n, 3*ConnBufferSize)
				}
				return err
			},
			// net.Buffers writes one part at a time to anything but a
			// socket; to a *net.TCPConn it is one writev.
			[][]byte{full, filled(3*ConnBufferSize, 'b')}},
		{"a read releases it", true,
			func(c *coalescingConn) error {
				if _, err := c.Read(make([]byte, 4096)); err != io.EOF {
					return err
				}
				return nil
			},
			[][]byte{full}},
		{"net/http's one-byte background read does not", true,
			func(c *coalescingConn) error {
				if _, err := c.Read(make([]byte, 1)); err != io.EOF {
					return err
				}
				_, err := c.Write([]byte("rest"))
				return err
			},
			[][]byte{append(bytes.Clone(full), "rest"...)}},
		{"close drops it", true,
			func(c *coalescingConn) error { return c.Close() },
			nil},
		{"close write releases it", true,
			func(c *coalescingConn) error { return c.CloseWrite() },
			[][]byte{full}},
		{"taking the connection over releases it", true,
			func(c *coalescingConn) error {
				raw, err := underneath(c)
				if err != nil {
					return err
				}
				if _, ok := raw.(*recordingConn); !ok {
					return fmt.Errorf("underneath gave a %T", raw)
				}
				_, err = raw.Write([]byte("event"))
				return err
			},
			[][]byte{full, []byte("event")}},
		{"nothing is held once closed", false,
			func(c *coalescingConn) error {
				_ = c.Close()
				if _, err := c.Write(full); err == nil {
					return fmt.Errorf("a write after close succeeded")
				}
				return nil
			},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			under := &recordingConn{}
			c := &coalescingConn{Conn: under, pool: newHeldPool()}
			if tt.fullFirst {
				if _, err := c.Write(full); err != nil {
					t.Fatal(err)
				}
			}
			if err := tt.do(c); err != nil {
				t.Fatal(err)
			}
			got := under.got()
			if len(got) != len(tt.want) {
				t.Fatalf("%d writes reached the connection, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if !bytes.Equal(got[i], tt.want[i]) {
					t.Errorf("write %d: %d bytes, want %d", i, len(got[i]), len(tt.want[i]))
				}
			}
		})
	}
}

// TestCloseDoesNotWaitForWrite: closing a connection cuts short a write
// stuck on a client that reads nothing, as http.Server.Close needs.
func TestCloseDoesNotWaitForWrite(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close() // and never reads
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := &coalescingConn{Conn: server, pool: newHeldPool()}

	wrote := make(chan struct{}, 1)
	stopped := make(chan error, 1)
	go func() {
		chunk := make([]byte, 1<<20)
		for {
			if _, err := c.Write(chunk); err != nil {
				stopped <- err
				return
			}
			select {
			case wrote <- struct{}{}:
			default:
			}
		}
	}()
	<-wrote // the next writes fill the socket's buffers and block
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for a write that cannot finish")
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the write went on after Close")
	}
}
