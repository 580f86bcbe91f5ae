// Command loopfloor measures what the kernel alone charges a process for
// sending bytes to many loopback TCP connections: the floor under the live
// stream's fan-out (docs/performance.md, "Live stream: the kernel's floor").
//
// It opens -conns connections to a child process of its own that reads and
// discards, then writes -rate bytes a second in rounds, every connection
// getting -chunk bytes a round (as -piece-byte iovecs when -piece is set,
// one piece otherwise), each write on a goroutine of its own as Herald's
// dispatcher does. With -sendfile each round is instead written once to a
// tmpfs file and sent to every connection by sendfile(2), which hands the
// kernel the file's pages rather than copying from the process: what a
// fan-out that never copies would cost. It prints the sender's and the
// receiver's CPU per byte sent, from getrusage, so the figure is the same
// whatever else the machine runs. Only 127.0.0.1 is used, on a port the kernel picks.
//
//	go run ./bench/floor/loopfloor                           # 1,000 streams, 64 KiB pieces
//	go run ./bench/floor/loopfloor -chunk 117000 -piece 330  # as many iovecs as events
//	go run ./bench/floor/loopfloor -chunk 262144 -sendfile   # no copy from the process
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

func main() {
	conns := flag.Int("conns", 1000, "connections")
	chunk := flag.Int("chunk", 64<<10, "bytes each connection gets a round")
	piece := flag.Int("piece", 0, "write each round's bytes as iovecs of this size (0: one piece)")
	sendfile := flag.Bool("sendfile", false, "send each round from a tmpfs file with sendfile(2) instead of writev")
	rate := flag.Float64("rate", 750e6, "bytes a second, all connections together")
	duration := flag.Duration("duration", 5*time.Second, "how long to send")
	drain := flag.String("drain", "", "internal: the address to read from, in the child")
	flag.Parse()
	log.SetFlags(0)
	if *drain != "" {
		readAll(*drain, *conns)
		return
	}
	if *conns < 1 || *chunk < 1 || *rate <= 0 {
		log.Fatal("loopfloor: -conns, -chunk and -rate must be positive")
	}
	if *sendfile && *piece > 0 {
		log.Fatal("loopfloor: -sendfile sends one piece; drop -piece")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	child := exec.Command(self, "-drain", ln.Addr().String(), "-conns", fmt.Sprint(*conns))
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		log.Fatal(err)
	}
	cs := make([]net.Conn, *conns)
	for i := range cs {
		if cs[i], err = ln.Accept(); err != nil {
			log.Fatal(err)
		}
	}
	_ = ln.Close()

	buf := make([]byte, *chunk)
	var rounds *roundFile
	if *sendfile {
		if rounds, err = newRoundFile(); err != nil {
			log.Fatal(err)
		}
		defer rounds.close()
	}
	gap := time.Duration(float64(time.Second) * float64(*conns**chunk) / *rate)
	cpu0, t0 := cpuTime(syscall.RUSAGE_SELF), time.Now()
	var sent int64
	for time.Since(t0) < *duration {
		start := time.Now()
		var wg sync.WaitGroup
		var at int64
		if rounds != nil {
			if at, err = rounds.add(buf); err != nil {
				log.Fatal(err)
			}
		}
		for _, c := range cs {
			wg.Go(func() {
				if rounds != nil {
					if err := rounds.sendTo(c.(*net.TCPConn), at, len(buf)); err != nil {
						log.Fatal(err)
					}
					return
				}
				out := net.Buffers{buf}
				if *piece > 0 {
					out = nil
					for o := 0; o < len(buf); o += *piece {
						out = append(out, buf[o:min(o+*piece, len(buf))])
					}
				}
				if _, err := out.WriteTo(c); err != nil {
					log.Fatal(err)
				}
			})
		}
		wg.Wait()
		sent += int64(*conns * *chunk)
		if wait := gap - time.Since(start); wait > 0 {
			time.Sleep(wait)
		}
	}
	elapsed, cpu := time.Since(t0), cpuTime(syscall.RUSAGE_SELF)-cpu0
	for _, c := range cs {
		_ = c.Close()
	}
	if err := child.Wait(); err != nil {
		log.Fatal(err)
	}
	how := pieces(*piece)
	if *sendfile {
		how = "one sendfile"
	}
	fmt.Printf("%d connections, %d bytes a round in %s: %.0f MB/s for %.1f s; sender %.2f cores, %.3f ns a byte; receiver %.3f ns a byte\n",
		*conns, *chunk, how, float64(sent)/elapsed.Seconds()/1e6, elapsed.Seconds(),
		cpu.Seconds()/elapsed.Seconds(), float64(cpu)/float64(sent), float64(cpuTime(syscall.RUSAGE_CHILDREN))/float64(sent))
}

func pieces(size int) string {
	if size == 0 {
		return "one piece"
	}
	return fmt.Sprintf("%d-byte pieces", size)
}

// readAll opens n connections to addr and reads them to their end.
func readAll(addr string, n int) {
	var wg sync.WaitGroup
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			log.Fatal(err)
		}
		wg.Go(func() { _, _ = io.Copy(io.Discard, c) })
	}
	wg.Wait()
}

func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		log.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// roundFile holds the rounds sendfile sends, one after another. A round's
// pages are never written again: sendfile hands the kernel the pages
// themselves, so a rewrite could change bytes still on their way. Rounds
// two behind are punched out instead, which only drops the file's hold on
// their pages.
type roundFile struct {
	f          *os.File
	end, freed int64
}

func newRoundFile() (*roundFile, error) {
	dir := "/dev/shm" // tmpfs: the pages never go to a disk
	if _, err := os.Stat(dir); err != nil {
		dir = os.TempDir()
	}
	f, err := os.CreateTemp(dir, "loopfloor-*")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(f.Name()) // gone with its last descriptor
	return &roundFile{f: f}, nil
}

// add writes a round after the last and returns where it starts.
func (r *roundFile) add(b []byte) (int64, error) {
	const punchHole, keepSize = 0x02, 0x01 // FALLOC_FL_*
	if behind := r.end - int64(2*len(b)); behind > r.freed {
		if err := syscall.Fallocate(int(r.f.Fd()), punchHole|keepSize, r.freed, behind-r.freed); err != nil {
			return 0, fmt.Errorf("punching out old rounds: %w", err)
		}
		r.freed = behind
	}
	at := r.end
	if _, err := r.f.WriteAt(b, at); err != nil {
		return 0, err
	}
	r.end += int64(len(b))
	return at, nil
}

// sendTo sends n bytes of the file from at to c, waiting in the runtime's
// poller (not a thread) while c's buffer is full.
func (r *roundFile) sendTo(c *net.TCPConn, at int64, n int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	err = raw.Write(func(fd uintptr) bool {
		for n > 0 {
			sent, err := syscall.Sendfile(int(fd), int(r.f.Fd()), &at, n)
			n -= max(sent, 0)
			switch {
			case err == syscall.EAGAIN:
				return false
			case err != nil:
				sendErr = err
				return true
			case sent == 0:
				sendErr = io.ErrUnexpectedEOF
				return true
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	return sendErr
}

func (r *roundFile) close() { _ = r.f.Close() }
