package snaphttp_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// churnHandler answers every message with big; a message with a
// listener for events (SSE, WebSocket) gets events of big first, as many
// as its body's length, until a send fails.
type churnHandler struct {
	bigHandler
}

func (h churnHandler) Serve(ctx context.Context, in snap.Inbound, send func(*snap.Message) error) *snap.Message {
	if send != nil {
		for range len(in.Raw) {
			if send(h.m) != nil {
				break
			}
		}
	}
	return h.m
}

// Every byte an answer takes of AnswerMemory is given back, whatever
// becomes of the answer: written, refused for want of room (POST, SSE,
// WebSocket), cut by its peer's close in the middle of its write, timed
// out on a peer that reads nothing, discarded once its exchange failed,
// or refused at shutdown. Many exchanges go through each path, from
// several addresses at once; once they are over, AnswerMemory holds
// nothing: a byte kept would be kept for good, and enough of them would
// refuse every answer of the node.
func TestAnswerMemoryIsGivenBackOnEveryPath(t *testing.T) {
	const size = 1 << 20
	// Tight: a peer's share holds two answers, the node's eight, and the
	// answers past them are refused. Queued: a peer's share holds four,
	// its stream's queue one, and the events past it wait in the queue.
	// In the first, the peers that read nothing fill AnswerMemory before
	// the others ask, and are cut when the round ends; in the second
	// their writes time out.
	t.Run("tight", func(t *testing.T) { churnAnswers(t, size, 2*size, 0, 5*time.Second) })
	t.Run("queued", func(t *testing.T) { churnAnswers(t, size, 4*size, size+4096, 300*time.Millisecond) })
}

// churnAnswers drives exchanges with answers of size through every path
// to a server of MaxResponse maxResponse, AnswerMemory 8 × size and
// StreamBufferBytes streamBytes, shuts it down, and checks that its
// AnswerMemory holds nothing. With a writeTimeout longer than a second,
// the peers that read nothing start first, and hold much of
// AnswerMemory when the others ask.
func churnAnswers(t *testing.T, size, maxResponse, streamBytes int, writeTimeout time.Duration) {
	h := churnHandler{bigHandler{bigAnswer(t, size)}}
	srv, err := snaphttp.New(snaphttp.Config{Handler: h, Logger: slog.New(slog.DiscardHandler),
		MaxResponse: maxResponse, AnswerMemory: 8 * int64(size), WriteTimeout: writeTimeout, StreamBufferBytes: streamBytes,
		StreamBuffer: 4, MaxTCPConns: 1000, MaxTCPConnsPerPeer: 1000, MaxConns: 1000, MaxConnsPerPeer: 1000, Rate: 0})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	host := ln.Addr().String()

	dial := func(i int) net.Conn {
		c, err := fromAddr(fmt.Sprintf("127.0.0.%d", 1+i%4))(t.Context(), "tcp", host)
		if err != nil {
			t.Error(err)
			return nil
		}
		return c
	}
	post := func(c net.Conn, sse bool, body string) {
		accept := "application/json"
		if sse {
			accept = "text/event-stream"
		}
		fmt.Fprintf(c, "POST /snap HTTP/1.1\r\nHost: %s\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: %s\r\nContent-Length: %d\r\n\r\n%s", host, accept, len(body), body)
	}
	// The peers' ways of taking their answers; a peer that reads nothing
	// closes its connection once the round's others are done (roundEnd).
	paths := []func(i int, roundEnd <-chan struct{}){
		func(i int, _ <-chan struct{}) { // reads the answer whole
			c := dial(i)
			if c == nil {
				return
			}
			defer c.Close()
			post(c, false, "{}")
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				io.Copy(io.Discard, resp.Body)
			}
		},
		func(i int, _ <-chan struct{}) { // closes once the status line came
			c := dial(i)
			if c == nil {
				return
			}
			defer c.Close()
			post(c, i%2 == 0, "{}")
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			http.ReadResponse(bufio.NewReaderSize(c, 512), nil)
		},
		func(i int, roundEnd <-chan struct{}) { // reads nothing: the write times out, or is cut
			c := dial(i)
			if c == nil {
				return
			}
			defer c.Close()
			c.(*net.TCPConn).SetReadBuffer(4096)
			post(c, i%2 == 0, strings.Repeat(" ", 8)+"{}")
			<-roundEnd
		},
		func(i int, _ <-chan struct{}) { // an SSE stream cut in the middle
			c := dial(i)
			if c == nil {
				return
			}
			defer c.Close()
			post(c, true, strings.Repeat(" ", 16)+"{}")
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			io.CopyN(io.Discard, c, int64(3*size/2))
		},
		func(i int, _ <-chan struct{}) { // WebSocket requests read ahead, the connection cut mid-answer
			d := websocket.Dialer{NetDialContext: fromAddr(fmt.Sprintf("127.0.0.%d", 1+i%4))}
			c, _, err := d.Dial("ws://"+host+"/snap", nil)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for j := range 4 {
				c.WriteMessage(websocket.TextMessage, []byte(strings.Repeat(" ", j)+"{}"))
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			for range i % 5 {
				if _, _, err := c.ReadMessage(); err != nil {
					return
				}
			}
		},
	}
	for round := range 4 {
		var others, holders sync.WaitGroup
		roundEnd := make(chan struct{})
		for i := range 40 {
			if (i+round)%len(paths) == 2 {
				holders.Go(func() { paths[2](i, roundEnd) })
			}
		}
		if writeTimeout > time.Second {
			for deadline := time.Now().Add(5 * time.Second); ; {
				if used, _, _, _ := snaphttp.AnswerMemoryHeld(srv); used >= 3*int64(size) {
					break
				}
				if time.Now().After(deadline) {
					used, peers, _, _ := snaphttp.AnswerMemoryHeld(srv)
					t.Fatalf("the peers that read nothing do not hold AnswerMemory: %d bytes, %d peers", used, peers)
				}
				runtime.Gosched()
			}
		}
		for i := range 40 {
			if p := (i + round) % len(paths); p != 2 {
				others.Go(func() { paths[p](i, roundEnd) })
			}
		}
		others.Wait()
		close(roundEnd)
		holders.Wait()
	}
	// Some exchanges are still at work when shutdown begins: WebSocket
	// connections with requests read ahead, whose peers read nothing.
	var open []*websocket.Conn
	for i := range 8 {
		d := websocket.Dialer{NetDialContext: fromAddr(fmt.Sprintf("127.0.0.%d", 1+i%4)), ReadBufferSize: 512}
		c, _, err := d.Dial("ws://"+host+"/snap", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for range 4 {
			c.WriteMessage(websocket.TextMessage, []byte("{}"))
		}
		open = append(open, c)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if used, peers, waiting, waitingPeers := snaphttp.AnswerMemoryHeld(srv); used != 0 || peers != 0 || waiting != 0 || waitingPeers != 0 {
		t.Errorf("after every exchange ended, AnswerMemory holds %d bytes of %d peers, and counts %d bytes of %d peers waiting, want none",
			used, peers, waiting, waitingPeers)
	}
}
