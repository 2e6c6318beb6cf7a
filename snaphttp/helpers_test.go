package snaphttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

var (
	serverKey = mustKey("1111111111111111111111111111111111111111111111111111111111111111")
	clientKey = mustKey("2222222222222222222222222222222222222222222222222222222222222222")
	otherKey  = mustKey("3333333333333333333333333333333333333333333333333333333333333333")
)

func mustKey(h string) *identity.Key {
	k, err := identity.FromHex(h)
	if err != nil {
		panic(err)
	}
	return k
}

func addr(k *identity.Key) string { return k.Address(identity.Mainnet) }

// testCard is a valid card of serverKey.
func testCard(name string) *snap.Card {
	return &snap.Card{
		Name: name, Description: "a test agent", Version: "1.0.0", Identity: addr(serverKey),
		Skills:            []snap.Skill{{ID: "echo", Name: "Echo", Description: "echoes", Tags: []string{"test"}}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
	}
}

// hooks lets a test take over handlers of the router.
type hooks struct {
	// send, when set, runs inside message/send before it answers.
	send func(ctx context.Context)
	// stream, when set, replaces the body of message/stream.
	stream func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error)
	// socketRead, when set, is the server's snaphttp.SetSocketRead.
	socketRead func(n int)
}

// newSNAPServer returns a real snap.Server of serverKey with handlers:
// message/send answers a submitted task; tasks/get answers 1001 for any id
// but "t-1"; message/stream emits payload.steps progress events then the
// completed task.
func newSNAPServer(t testing.TB, h *hooks) *snap.Server {
	t.Helper()
	r := snap.NewRouter()
	task := func(id, state string) map[string]any {
		return map[string]any{"task": map[string]any{"id": id, "status": map[string]any{"state": state, "timestamp": "2026-01-01T00:00:00Z"}}}
	}
	r.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		if h != nil && h.send != nil {
			h.send(ctx)
		}
		return task("t-"+req.ID[:8], "submitted"), nil
	})
	r.Handle("tasks/get", func(ctx context.Context, req *snap.Verified) (any, error) {
		var p struct {
			TaskID string `json:"taskId"`
		}
		json.Unmarshal(req.Payload, &p)
		if p.TaskID != "t-1" {
			return nil, snap.NewError(snap.CodeTaskNotFound, "task not found", map[string]any{"taskId": p.TaskID})
		}
		return task("t-1", "working"), nil
	})
	r.HandleStream("message/stream", func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		if h != nil && h.stream != nil {
			return h.stream(ctx, req, emit)
		}
		var p struct {
			Steps int `json:"steps"`
		}
		json.Unmarshal(req.Payload, &p)
		for i := 1; i <= p.Steps; i++ {
			if err := emit(map[string]any{"taskId": "t-s", "progress": float64(i) / float64(p.Steps), "message": "step " + string(rune('0'+i%10))}); err != nil {
				return nil, err
			}
		}
		return task("t-s", "completed"), nil
	})
	return snap.NewServer(snap.ServerConfig{
		Key: serverKey, Router: r, Logger: slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: addr(serverKey), Replay: snap.NewMemoryReplayStore(0)}),
	})
}

// errorAnswer is the SNAP error an HTTP answer carries.
type errorAnswer struct {
	Error struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data"`
	} `json:"error"`
}

// env is a snaphttp.Server on a loopback port in front of a real
// snap.Server.
type env struct {
	srv    *snaphttp.Server
	snap   *snap.Server
	base   string // http://127.0.0.1:port (the address listened on)
	ws     string // ws://127.0.0.1:port/snap
	client *client.HTTP
	stop   func() error
}

// start serves cfg (Handler defaults to a real snap.Server) on a
// loopback port until the test ends; mutate may change the config, and
// ln wrap the listener.
func start(t testing.TB, h *hooks, mutate func(*snaphttp.Config), wrap ...func(net.Listener) net.Listener) *env {
	t.Helper()
	return startOn(t, "tcp", "127.0.0.1:0", h, mutate, wrap...)
}

// startOn is start listening on network and address.
func startOn(t testing.TB, network, address string, h *hooks, mutate func(*snaphttp.Config), wrap ...func(net.Listener) net.Listener) *env {
	t.Helper()
	s := newSNAPServer(t, h)
	cfg := snaphttp.Config{
		Handler: s, Key: serverKey, Address: s.Address(), Logger: slog.New(slog.DiscardHandler),
		Card: func() *snap.Card { return testCard("agent") },
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := snaphttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if h != nil && h.socketRead != nil {
		snaphttp.SetSocketRead(srv, h.socketRead)
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range wrap {
		ln = w(ln)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() { cancel(); serveErr = <-done })
		return serveErr
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	base := "http://" + ln.Addr().String()
	return &env{
		srv: srv, snap: s, base: base, ws: "ws://" + ln.Addr().String() + "/snap",
		client: client.NewHTTP(client.HTTPConfig{Key: clientKey}),
		stop:   stop,
	}
}

// request returns a signed request from clientKey to serverKey.
func request(t testing.TB, method, payload string) *snap.Message {
	t.Helper()
	return requestFrom(t, clientKey, addr(serverKey), method, payload, time.Now())
}

func requestFrom(t testing.TB, k *identity.Key, to, method, payload string, at time.Time) *snap.Message {
	t.Helper()
	m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: addr(k), To: to,
		Type: snap.TypeRequest, Method: method, Payload: []byte(payload), Timestamp: at.Unix()}
	if err := m.Sign(k); err != nil {
		t.Fatal(err)
	}
	return m
}

func raw(t testing.TB, m *snap.Message) []byte {
	t.Helper()
	b, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// verify checks raw as the client must: a response or event of serverKey
// to clientKey, signed.
func verify(t testing.TB, b []byte) *snap.Verified {
	t.Helper()
	v, err := snap.NewValidator(snap.Config{Self: addr(clientKey)}).Validate(context.Background(), b)
	if err != nil {
		t.Fatalf("received message does not validate: %v\n%s", err, b)
	}
	if !v.Signed || v.From != addr(serverKey) || v.To != addr(clientKey) {
		t.Fatalf("received message: signed %v from %s to %s", v.Signed, v.From, v.To)
	}
	return v
}

// errCode returns payload.error.code, or 0.
func errCode(payload []byte) snap.Code {
	if e := snap.ResponseError(payload); e != nil {
		return e.Code
	}
	return 0
}

const sendPayload = `{"message":{"messageId":"m-1","role":"user","parts":[{"text":"hello"}]}}`

func isClosed(err error) bool {
	return err != nil && (errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "close") ||
		strings.Contains(err.Error(), "EOF") || strings.Contains(err.Error(), "reset"))
}
