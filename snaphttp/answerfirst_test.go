package snaphttp_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
	"github.com/snapnode/snapnode/tasks"
)

// slowOrNode answers "{}", a slow peer's request, with big, and any other
// message as node does.
type slowOrNode struct {
	*snap.Server
	big *snap.Message
}

func (h slowOrNode) Serve(ctx context.Context, in snap.Inbound, send func(*snap.Message) error) *snap.Message {
	if string(in.Raw) == "{}" {
		return h.big
	}
	return h.Server.Serve(ctx, in, send)
}

// taskNode is a snap.Server over a tasks.Service with a memory store,
// whose message/send creates its task and gives it, as an agent that
// answers at once would, an artifact of artifact bytes.
func taskNode(t testing.TB, artifact int) (*snap.Server, *tasks.Service) {
	t.Helper()
	svc := tasks.NewService(tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: 1 << 20}), tasks.ServiceOptions{Now: time.Now})
	r := snap.NewRouter()
	svc.Register(r, func(ctx context.Context, req *snap.Verified, p *tasks.SendParams) (any, bool, error) {
		task, err := svc.SendMessage(ctx, req.From, p)
		if err != nil {
			return nil, true, err
		}
		parts := make([]tasks.Part, 0, artifact/(64<<10)+1)
		for n := artifact; n > 0; n -= 64 << 10 {
			parts = append(parts, snap.TextPart(strings.Repeat("r", min(n, 64<<10))))
		}
		if task, err = svc.AddArtifact(ctx, task.ID, tasks.Artifact{ArtifactID: "result", Parts: parts}); err != nil {
			return nil, true, err
		}
		return tasks.NewTaskResponse(task), true, nil
	})
	return snap.NewServer(snap.ServerConfig{
		Key: serverKey, Router: r, Logger: slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: addr(serverKey), Replay: snap.NewMemoryReplayStore(0)}),
	}), svc
}

// holdAnswerMemory has a peer of address ip post "{}" and read only the
// status line of its answer, which then holds about size bytes of
// AnswerMemory while it is written (for WriteTimeout).
func holdAnswerMemory(t *testing.T, e *env, ip string, size int64) {
	t.Helper()
	host := strings.TrimPrefix(e.base, "http://")
	slow, err := fromAddr(ip)(t.Context(), "tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slow.Close() })
	slow.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(slow, "POST /snap HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", host)
	if resp, err := http.ReadResponse(bufio.NewReaderSize(slow, 512), nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the slow peer's answer: %v %v", resp, err)
	}
	if used, _, _, _ := snaphttp.AnswerMemoryHeld(e.srv); used < size {
		t.Fatalf("the slow peer's answer holds %d bytes of AnswerMemory, want at least %d", used, size)
	}
}

// A message/send without idempotencyKey (SDK peers send none) whose
// answer, once made, finds no room in AnswerMemory makes one task,
// however often its peer sends it again when told to: the 503 that tells
// a peer to retry is only ever the answer to a request not handled. Before,
// the answer was replaced by 503 with Retry-After after its task was
// made, and each retry made another.
func TestAnswerWithoutRoomIsNotRetried(t *testing.T) {
	node, svc := taskNode(t, 768<<10)
	e := start(t, nil, func(c *snaphttp.Config) {
		// An answer of 15.5 MiB fills more than the socket's buffers.
		c.Handler = slowOrNode{Server: node, big: bigAnswer(t, 15<<20+512<<10)}
		c.MaxResponse, c.AnswerMemory = 16<<20, 16<<20
		c.WriteTimeout = time.Minute // the slow peer holds its room for the whole test
		c.MaxTCPConnsPerPeer = 100
	})
	// Half a MiB of AnswerMemory is left: room for the request, not for
	// its answer of 768 KiB.
	holdAnswerMemory(t, e, "127.0.0.1", 15<<20)

	hc := &http.Client{Transport: &http.Transport{DialContext: fromAddr("127.0.0.2")}}
	var status int
	var body []byte
	for attempt := 0; attempt < 4; attempt++ {
		// A peer that takes 503 for "not handled" sends its request
		// again, signed anew.
		b := raw(t, request(t, "message/send", sendPayload))
		resp, err := hc.Post(e.base+"/snap", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if status = resp.StatusCode; status != http.StatusServiceUnavailable {
			break
		}
	}
	if used, _, _, _ := snaphttp.AnswerMemoryHeld(e.srv); used < 15<<20 {
		t.Fatalf("the slow peer's answer no longer holds its room (%d bytes held): the test proves nothing", used)
	}
	made, err := svc.List(t.Context(), tasks.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(made) != 1 {
		t.Fatalf("the message/send made %d tasks, want 1 (last answer: HTTP %d %.300s)", len(made), status, body)
	}
	if status != http.StatusOK {
		t.Fatalf("HTTP %d %.300s, want 200 with the task abridged", status, body)
	}
	if len(body) > 64<<10 {
		t.Fatalf("answered %d bytes, want the task abridged", len(body))
	}
	abridged(t, body, made[0])
}

// abridged checks b, a signed answer, for the task made abridged: its
// id and state, no history nor artifacts, and "abridged" naming what it
// left out and tasks/get.
func abridged(t *testing.T, b []byte, made *tasks.Task) {
	t.Helper()
	if len(b) > 64<<10 {
		t.Fatalf("answered %d bytes, want the task abridged", len(b))
	}
	v := verify(t, b)
	var p struct {
		Task struct {
			ID     string `json:"id"`
			Status struct {
				State string `json:"state"`
			} `json:"status"`
			History   []json.RawMessage `json:"history"`
			Artifacts []json.RawMessage `json:"artifacts"`
		} `json:"task"`
		Abridged struct {
			Omitted []string `json:"omitted"`
			Note    string   `json:"note"`
		} `json:"abridged"`
	}
	if err := json.Unmarshal(v.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if p.Task.ID != made.ID || p.Task.Status.State != string(made.Status.State) {
		t.Errorf("answered task %s (%s), want %s (%s)", p.Task.ID, p.Task.Status.State, made.ID, made.Status.State)
	}
	if len(p.Task.History) != 0 || len(p.Task.Artifacts) != 0 || len(p.Abridged.Omitted) == 0 || !strings.Contains(p.Abridged.Note, "tasks/get") {
		t.Errorf("answer %.300s, want the task without history nor artifacts, abridged naming what it left out and tasks/get", v.Payload)
	}
}

// Over WebSocket and SSE too, an answer that outgrows its reservation and
// finds no room for the rest is the task abridged, signed, not the busy
// refusal: one task is made, and the peer is told it.
func TestAnswerWithoutRoomIsAbridgedOverWebSocketAndSSE(t *testing.T) {
	for _, tc := range []struct{ name, method string }{{"websocket", "message/send"}, {"sse", "message/stream"}} {
		t.Run(tc.name, func(t *testing.T) {
			node, svc := taskNode(t, 768<<10)
			e := start(t, nil, func(c *snaphttp.Config) {
				c.Handler = slowOrNode{Server: node, big: bigAnswer(t, 15<<20+512<<10)}
				c.MaxResponse, c.AnswerMemory = 16<<20, 16<<20
				c.WriteTimeout = time.Minute
				c.MaxTCPConnsPerPeer = 100
			})
			holdAnswerMemory(t, e, "127.0.0.1", 15<<20)
			b := raw(t, request(t, tc.method, sendPayload))
			var answer []byte
			switch tc.name {
			case "websocket":
				d := websocket.Dialer{NetDialContext: fromAddr("127.0.0.2")}
				c, _, err := d.Dial(e.ws, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if err := c.WriteMessage(websocket.TextMessage, b); err != nil {
					t.Fatal(err)
				}
				if _, answer, err = c.ReadMessage(); err != nil {
					t.Fatal(err)
				}
			case "sse":
				hc := &http.Client{Transport: &http.Transport{DialContext: fromAddr("127.0.0.2")}}
				req, _ := http.NewRequest("POST", e.base+"/snap", strings.NewReader(string(b)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "text/event-stream")
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("HTTP %d %.300s", resp.StatusCode, body)
				}
				events := strings.Split(strings.TrimSpace(string(body)), "\n\n")
				answer = []byte(strings.TrimPrefix(events[len(events)-1], "data: "))
			}
			if used, _, _, _ := snaphttp.AnswerMemoryHeld(e.srv); used < 15<<20 {
				t.Fatalf("the slow peer's answer no longer holds its room (%d bytes held): the test proves nothing", used)
			}
			made, err := svc.List(t.Context(), tasks.Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(made) != 1 {
				t.Fatalf("made %d tasks, want 1", len(made))
			}
			abridged(t, answer, made[0])
		})
	}
}
