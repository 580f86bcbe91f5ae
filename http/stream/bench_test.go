package stream

import (
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"herald/model"
)

// BenchmarkStreamRound is the fan-out's hot path: one dispatcher round
// handing the newest events to every stream, on real loopback connections
// whose far ends read and discard, timed until every write has gone out.
// The streams either take everything or filter on a word half the
// messages have.
func BenchmarkStreamRound(b *testing.B) {
	for _, bc := range []struct {
		streams, events int
		q               string
	}{
		{1000, 1, ""},
		{1000, 64, ""},
		{1000, 64, "apple"},
		{100, 512, ""},
	} {
		name := fmt.Sprintf("streams=%d/events=%d", bc.streams, bc.events)
		if bc.q != "" {
			name += "/q=" + bc.q
		}
		b.Run(name, func(b *testing.B) { benchStreamRound(b, bc.streams, bc.events, bc.q) })
	}
}

func benchStreamRound(b *testing.B, streams, events int, q string) {
	db, hub := newTestHub(b)
	u, _ := testUser(b, db, "bench@example.com")
	for i := range events {
		content := fmt.Sprintf("stream benchmark message %d river stone cloud lantern maple harbor", i)
		if i%2 == 0 {
			content += " apple"
		}
		if _, err := db.CreateMessage(context.Background(), model.ByUser(u.ID), content); err != nil {
			b.Fatal(err)
		}
	}
	head, _, _ := db.ChangeHead(context.Background())
	hub.window.rendered = head - uint64(events)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	subs := make([]*subscriber, streams)
	for i := range subs {
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		server, err := ln.Accept()
		if err != nil {
			b.Fatal(err)
		}
		go func() { _, _ = io.Copy(io.Discard, client) }()
		defer client.Close()
		defer server.Close()
		subs[i] = &subscriber{conn: server}
		if q != "" {
			subs[i].filter.terms = []string{q}
		}
	}
	for b.Loop() {
		for _, sub := range subs {
			sub.last = head - uint64(events)
		}
		hub.round(context.Background(), subs, head, head, time.Now())
		for _, sub := range subs {
			for sub.writing.Load() {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*streams*events), "ns/event/stream")
}
