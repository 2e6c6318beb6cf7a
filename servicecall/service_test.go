package servicecall_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/servicecall"
	"github.com/snapnode/snapnode/snap"
)

type callCase struct {
	Name       string          `json:"name"`
	Caller     string          `json:"caller"` // "" (allowed) or "stranger"
	To         string          `json:"to"`     // "" (absent), "self" or "other"
	Payload    json.RawMessage `json:"payload"`
	Reply      json.RawMessage `json:"reply"`
	Code       int             `json:"code"`
	Field      string          `json:"field"`
	Constraint string          `json:"constraint"`
	Data       map[string]any  `json:"data"`
	Hidden     string          `json:"hidden"` // must not appear in the answer
}

// testServices registers the services the table calls.
func testServices(t *testing.T, reg *servicecall.Registry) {
	t.Helper()
	reg.Handle("echo", func(ctx context.Context, c *servicecall.Call) (any, error) {
		return map[string]any{"arguments": c.Arguments, "from": c.From}, nil
	})
	reg.Handle("weather", func(ctx context.Context, c *servicecall.Call) (any, error) {
		var args struct {
			City string `json:"city"`
			Days int    `json:"days"`
		}
		if err := c.Bind(&args); err != nil {
			return nil, err
		}
		return map[string]any{"city": args.City, "days": args.Days, "celsius": 21}, nil
	})
	reg.Handle("refuse", func(ctx context.Context, c *servicecall.Call) (any, error) {
		return nil, snap.FieldError("payload.arguments.level", "maximum", 3, 9)
	})
	reg.Handle("fail", func(ctx context.Context, c *servicecall.Call) (any, error) {
		return nil, errors.New("database password is hunter2")
	})
	reg.Handle("list", func(ctx context.Context, c *servicecall.Call) (any, error) {
		return []int{1, 2}, nil
	})
}

// Every case of testdata/calls.json through a real snap.Server: the
// caller's request is signed and validated as over any transport, and the
// signed answer is checked by the caller.
func TestCalls(t *testing.T) {
	raw, err := os.ReadFile("testdata/calls.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []callCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	svcKey, caller, stranger, other := newKey(t), newKey(t), newKey(t), newKey(t)
	now := time.Unix(1_770_000_000, 0)
	clock := func() time.Time { return now }
	reg, err := servicecall.New(servicecall.Config{Allow: []string{caller.Address(identity.Mainnet)}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	testServices(t, reg)
	router := snap.NewRouter()
	router.Handle(servicecall.Method, reg.Serve)
	self := svcKey.Address(identity.Mainnet)
	server := snap.NewServer(snap.ServerConfig{Key: svcKey, Router: router, Now: clock, Logger: slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: self, Now: clock, Replay: snap.NewMemoryReplayStore(0)})})

	for i, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			from := caller
			if tc.Caller == "stranger" {
				from = stranger
			}
			req := &snap.Message{ID: "call-" + string(rune('a'+i)), Version: snap.ProtocolVersion, Type: snap.TypeRequest,
				Method: servicecall.Method, From: from.Address(identity.Mainnet), Payload: tc.Payload, Timestamp: now.Unix()}
			switch tc.To {
			case "self":
				req.To = self
			case "other":
				req.To = other.Address(identity.Mainnet)
			}
			if err := req.Sign(from); err != nil {
				t.Fatal(err)
			}
			in, _ := req.MarshalJSON()
			resp := server.Respond(context.Background(), snap.Inbound{Raw: in})
			if resp == nil {
				t.Fatal("no answer")
			}
			out, _ := resp.MarshalJSON()
			got, err := snap.NewValidator(snap.Config{Self: from.Address(identity.Mainnet), Now: clock}).Validate(context.Background(), out)
			if err != nil || !got.Signed || got.Method != servicecall.Method || got.From != self {
				t.Fatalf("answer does not verify as the service's: %v\n%s", err, out)
			}
			if tc.Hidden != "" && strings.Contains(string(out), tc.Hidden) {
				t.Errorf("answer shows %q: %s", tc.Hidden, out)
			}
			if tc.Code == 0 {
				want := strings.ReplaceAll(string(tc.Reply), "$caller", from.Address(identity.Mainnet))
				if !jsonEqual(t, got.Payload, []byte(want)) {
					t.Errorf("reply %s, want %s", got.Payload, want)
				}
				return
			}
			var p struct {
				Error struct {
					Code int            `json:"code"`
					Data map[string]any `json:"data"`
				} `json:"error"`
			}
			json.Unmarshal(got.Payload, &p)
			e := p.Error
			if e.Code != tc.Code {
				t.Fatalf("code %d, want %d: %s", e.Code, tc.Code, got.Payload)
			}
			if tc.Field != "" && (e.Data["field"] != tc.Field || e.Data["constraint"] != tc.Constraint) {
				t.Errorf("data %v, want field %q constraint %q", e.Data, tc.Field, tc.Constraint)
			}
			for k, v := range tc.Data {
				if !reflect.DeepEqual(e.Data[k], v) {
					t.Errorf("data.%s = %v, want %v", k, e.Data[k], v)
				}
			}
		})
	}
}

// An allowlist entry on either network allows the same key on both: the
// identity is the key.
func TestAllowlistByKey(t *testing.T) {
	k := newKey(t)
	reg, err := servicecall.New(servicecall.Config{Allow: []string{k.Address(identity.Testnet)}})
	if err != nil {
		t.Fatal(err)
	}
	if !reg.Allowed(k.OutputKey()) {
		t.Error("the key of an allowed testnet address is not allowed")
	}
	if reg.Allowed(newKey(t).OutputKey()) {
		t.Error("another key is allowed")
	}
}

// SetAllow replaces the allowlist; a bad address changes nothing.
func TestSetAllow(t *testing.T) {
	a, b := newKey(t), newKey(t)
	reg, err := servicecall.New(servicecall.Config{Allow: []string{a.Address(identity.Mainnet)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.SetAllow([]string{b.Address(identity.Mainnet)}); err != nil {
		t.Fatal(err)
	}
	if reg.Allowed(a.OutputKey()) || !reg.Allowed(b.OutputKey()) {
		t.Error("after SetAllow([b]): a is allowed or b is not")
	}
	if err := reg.SetAllow([]string{a.Address(identity.Mainnet), "bc1pnotanaddress"}); err == nil || !strings.Contains(err.Error(), "bc1pnotanaddress") {
		t.Errorf("a bad address: %v", err)
	}
	if reg.Allowed(a.OutputKey()) || !reg.Allowed(b.OutputKey()) {
		t.Error("a refused SetAllow changed the allowlist")
	}
}

// Configuration mistakes are caught when the registry is made or a
// service registered, not when a call comes.
func TestRegistryMistakes(t *testing.T) {
	if _, err := servicecall.New(servicecall.Config{Allow: []string{"bc1pnotanaddress"}}); err == nil || !strings.Contains(err.Error(), "bc1pnotanaddress") {
		t.Errorf("a bad allowed address: %v", err)
	}
	reg, _ := servicecall.New(servicecall.Config{})
	h := func(context.Context, *servicecall.Call) (any, error) { return map[string]any{}, nil }
	reg.Handle("a.b-c_d", h)
	for _, bad := range []string{"", "A", "a b", "1a", "a..b", "a-", strings.Repeat("a", servicecall.MaxNameLen+1), "a.b-c_d"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%q) did not panic", bad)
				}
			}()
			reg.Handle(bad, h)
		}()
	}
	if got := reg.Names(); !reflect.DeepEqual(got, []string{"a.b-c_d"}) {
		t.Errorf("Names() = %v", got)
	}
}

func newKey(t *testing.T) *identity.Key {
	t.Helper()
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}
