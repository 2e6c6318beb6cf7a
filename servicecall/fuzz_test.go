package servicecall

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// FuzzCall feeds payloads to an allowed caller's call: the registry never
// panics, answers either a JSON object or a SNAP error in the 1000–5999
// range, and a 1004 always names a payload field.
func FuzzCall(f *testing.F) {
	for _, s := range []string{`{"name":"echo"}`, `{"name":"echo","arguments":{"x":1}}`, `{"name":7}`, `{}`,
		`{"name":"echo","arguments":[]}`, `{"name":"bind","arguments":{"n":"x"}}`, `{"name":"bind","arguments":{"m":1}}`, `[]`, `null`} {
		f.Add([]byte(s))
	}
	k, _ := identity.Generate()
	addr := k.Address(identity.Mainnet)
	reg, err := New(Config{Allow: []string{addr}})
	if err != nil {
		f.Fatal(err)
	}
	reg.Handle("echo", func(ctx context.Context, c *Call) (any, error) { return map[string]any{"a": c.Arguments}, nil })
	reg.Handle("bind", func(ctx context.Context, c *Call) (any, error) {
		var a struct{ N int }
		return map[string]int{"n": a.N}, c.Bind(&a)
	})
	sender, _ := identity.ParseAddress(addr)
	f.Fuzz(func(t *testing.T, payload []byte) {
		req := &snap.Verified{Message: &snap.Message{From: addr, Method: Method, Payload: payload}, Sender: sender, Signed: true}
		reply, err := reg.Serve(context.Background(), req)
		if err != nil {
			var se *snap.Error
			if !errors.As(err, &se) || se.Code < 1000 || se.Code > 5999 {
				t.Fatalf("error %v is not a SNAP error", err)
			}
			if f, _ := se.Data["field"].(string); se.Code == snap.CodeInvalidPayload && len(f) < len("payload") {
				t.Fatalf("1004 names no payload field: %v", se.Data)
			}
			return
		}
		b, _ := json.Marshal(reply)
		var obj map[string]any
		if json.Unmarshal(b, &obj) != nil {
			t.Fatalf("reply %s is not an object", b)
		}
	})
}
