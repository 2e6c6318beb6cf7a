package snaphttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/internal/ratelimit"
	"github.com/snapnode/snapnode/servicecall"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// startService serves a snap.Server whose only method is service/call,
// with the services "echo" and "boom", clientKey on the allowlist, and a
// per-identity limit of burst requests (0: none).
func startService(t *testing.T, burst int) *env {
	t.Helper()
	reg, err := servicecall.New(servicecall.Config{Allow: []string{addr(clientKey)}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	reg.Handle("echo", func(ctx context.Context, c *servicecall.Call) (any, error) {
		return map[string]any{"from": c.From, "arguments": c.Arguments}, nil
	})
	reg.Handle("boom", func(ctx context.Context, c *servicecall.Call) (any, error) {
		return nil, errors.New("disk on fire")
	})
	reg.Handle("upstream", func(ctx context.Context, c *servicecall.Call) (any, error) {
		return nil, snap.NewError(snap.CodeTransportUnavail, "the upstream service is unreachable", nil)
	})
	r := snap.NewRouter()
	r.Handle(servicecall.Method, reg.Serve)
	vc := snap.Config{Self: addr(serverKey), Replay: snap.NewMemoryReplayStore(0)}
	if burst > 0 {
		vc.Limiter = ratelimit.New(ratelimit.Config{Rate: 0.001, Burst: burst})
	}
	s := snap.NewServer(snap.ServerConfig{Key: serverKey, Router: r, Logger: slog.New(slog.DiscardHandler), Validator: snap.NewValidator(vc)})
	return start(t, nil, func(c *snaphttp.Config) { c.Handler = s })
}

// Over HTTP a service/call is answered as a service answers: the reply
// object as the body, refusals as {"error": …} with 401, 403, 404, 400,
// 429 or 500, each carrying its SNAP code; a service that failed, its
// id spent, is 500 with 2006 (not 401, a 2xxx's status).
func TestServiceCallOverHTTP(t *testing.T) {
	e := startService(t, 0)
	ctx := context.Background()
	endpoint := e.base + "/snap"

	for _, to := range []string{"", addr(serverKey)} {
		reply, err := e.client.Call(ctx, endpoint, to, "echo", map[string]any{"n": 1})
		if err != nil {
			t.Fatalf("to %q: %v", to, err)
		}
		var got struct {
			From      string         `json:"from"`
			Arguments map[string]any `json:"arguments"`
		}
		if err := json.Unmarshal(reply, &got); err != nil || got.From != addr(clientKey) || got.Arguments["n"] != 1.0 {
			t.Errorf("to %q: reply %s", to, reply)
		}
	}

	stranger := client.NewHTTP(client.HTTPConfig{Key: otherKey})
	refusals := []struct {
		name   string
		client *client.HTTP
		svc    string
		args   any
		status int
		code   snap.Code
	}{
		{"caller off the allowlist", stranger, "echo", nil, http.StatusForbidden, snap.CodeIdentityMismatch},
		{"unknown service", e.client, "nope", nil, http.StatusNotFound, snap.CodeSkillNotFound},
		{"arguments not an object", e.client, "echo", []int{1}, http.StatusBadRequest, snap.CodeInvalidPayload},
		{"the service fails", e.client, "boom", nil, http.StatusInternalServerError, snap.CodeDuplicateMessage},
	}
	for _, tc := range refusals {
		_, err := tc.client.Call(ctx, endpoint, "", tc.svc, tc.args)
		var se *client.StatusError
		if !errors.As(err, &se) || se.StatusCode != tc.status || se.Err == nil || se.Err.Code != tc.code {
			t.Errorf("%s: %v, want HTTP %d with SNAP %d", tc.name, err, tc.status, tc.code)
		}
	}

	// A request that does not authenticate is 401 with its SNAP code.
	m := requestFrom(t, clientKey, "", servicecall.Method, `{"name":"echo"}`, time.Now())
	m.Payload = []byte(`{"name":"boom"}`) // signed over another payload
	status, body := postRaw(t, endpoint, raw(t, m))
	if status != http.StatusUnauthorized || errCode(body) != snap.CodeSignatureInvalid {
		t.Errorf("bad signature: HTTP %d %s", status, body)
	}
	// Other methods still need to.
	m = requestFrom(t, clientKey, "", "message/send", `{}`, time.Now())
	status, body = postRaw(t, endpoint, raw(t, m))
	if v := verify(t, body); status != http.StatusOK || errCode(v.Payload) != snap.CodeInvalidPayload {
		t.Errorf("message/send without to: HTTP %d %s", status, body)
	}
}

// The other refusals get the status errors.md gives their code: a
// version the node does not speak is the caller's mistake, 400 (5004 is
// never retried), not 500; a service whose upstream transport failed
// (4xxx) is 502, not 400, which would tell the caller its request was
// bad.
func TestServiceCallStatusOfOtherCodes(t *testing.T) {
	e := startService(t, 0)
	endpoint := e.base + "/snap"

	m := requestFrom(t, clientKey, "", servicecall.Method, `{"name":"echo"}`, time.Now())
	m.Version = "9.9" // not signed
	status, body := postRaw(t, endpoint, raw(t, m))
	if status != http.StatusBadRequest || errCode(body) != snap.CodeVersionNotSupported {
		t.Errorf("unsupported version: HTTP %d %s, want 400 with 5004", status, body)
	}

	_, err := e.client.Call(context.Background(), endpoint, "", "upstream", nil)
	var se *client.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusBadGateway || se.Err == nil || se.Err.Code != snap.CodeTransportUnavail {
		t.Errorf("upstream unreachable: %v, want HTTP 502 with 4001", err)
	}
}

// A caller over its allowance gets 429 with Retry-After and 5002.
func TestServiceCallRateLimited(t *testing.T) {
	e := startService(t, 1)
	endpoint := e.base + "/snap"
	if _, err := e.client.Call(context.Background(), endpoint, "", "echo", nil); err != nil {
		t.Fatal(err)
	}
	_, err := e.client.Call(context.Background(), endpoint, "", "echo", nil)
	var se *client.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusTooManyRequests || se.RetryAfter < time.Second || !errors.Is(err, se.Err) || se.Err.Code != snap.CodeRateLimitExceeded {
		t.Errorf("over the allowance: %v", err)
	}
}

// Over WebSocket the reply travels as the payload of a signed SNAP
// response, since a frame of the stream must be a SNAP message.
func TestServiceCallOverWebSocket(t *testing.T) {
	e := startService(t, 0)
	resp, err := e.client.SendWS(context.Background(), e.ws, &snap.Message{To: addr(serverKey), Method: servicecall.Method, Payload: []byte(`{"name":"echo","arguments":{"k":"v"}}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"arguments":{"k":"v"},"from":"` + addr(clientKey) + `"}`
	if string(resp.Payload) != want {
		t.Errorf("payload %s, want %s", resp.Payload, want)
	}
}

func postRaw(t *testing.T, url string, body []byte) (int, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
