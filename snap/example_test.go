package snap_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// A request signed by one agent and validated by its recipient.
func Example() {
	alice, _ := identity.FromHex(strings.Repeat("0a", 32))
	bob, _ := identity.FromHex(strings.Repeat("0b", 32))
	now := time.Unix(1738627200, 0)

	m := &snap.Message{
		ID: "msg-001", Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: "tasks/get",
		From: alice.Address(identity.Mainnet), To: bob.Address(identity.Mainnet),
		Payload: []byte(`{"taskId": "task-001"}`), Timestamp: now.Unix(),
	}
	if err := m.Sign(alice); err != nil {
		panic(err)
	}
	raw, _ := m.MarshalJSON()

	v := snap.NewValidator(snap.Config{
		Self:   bob.Address(identity.Mainnet),
		Now:    func() time.Time { return now },
		Replay: snap.NewMemoryReplayStore(0),
	})
	got, err := v.Validate(context.Background(), raw)
	fmt.Println(got.Method, got.Signed, string(got.Payload), err)

	// The same message again is a replay.
	_, err = v.Validate(context.Background(), raw)
	fmt.Println(errors.Is(err, snap.CodeDuplicateMessage))
	// Output:
	// tasks/get true {"taskId":"task-001"} <nil>
	// true
}

// Every rejection names the field and the rule.
func ExampleError() {
	_, err := snap.Parse([]byte(`{"id":"msg@001","version":"0.1","from":"bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397",
		"type":"request","method":"message/send","payload":{},"timestamp":1738627200}`))
	var se *snap.Error
	errors.As(err, &se)
	fmt.Println(int(se.Code), se.Data["field"], se.Data["constraint"], se.Data["received"])
	// Output: 1004 id pattern msg@001
}

// Canonicalize implements RFC 8785 as JavaScript peers do: numbers as
// ECMAScript doubles, names sorted by UTF-16 code units.
func ExampleCanonicalize() {
	out, _ := snap.Canonicalize([]byte(`{"b": 1e21, "a": 1.0, "c": -0}`))
	fmt.Println(string(out))
	_, err := snap.Canonicalize([]byte(`{"a": 1, "a": 2}`))
	fmt.Println(errors.Is(err, snap.ErrNotIJSON))
	// Output:
	// {"a":1,"b":1e+21,"c":0}
	// true
}

// A streaming method: events go out as signed "event" messages through
// the transport's send, then the final response is returned.
func ExampleServer_Serve() {
	node, _ := identity.FromHex(strings.Repeat("0b", 32))
	peer, _ := identity.FromHex(strings.Repeat("0a", 32))
	now := time.Unix(1738627200, 0)
	clock := func() time.Time { return now }

	router := snap.NewRouter()
	router.HandleStream("message/stream", func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		for _, p := range []float64{0.5, 1} {
			if err := emit(map[string]any{"taskId": "t-1", "progress": p, "message": "working"}); err != nil {
				return nil, err // the transport is gone
			}
		}
		return map[string]any{"task": map[string]any{"id": "t-1", "status": map[string]any{"state": "completed"}}}, nil
	})
	server := snap.NewServer(snap.ServerConfig{Key: node, Router: router, Now: clock,
		Validator: snap.NewValidator(snap.Config{Self: node.Address(identity.Mainnet), Now: clock})})

	req := &snap.Message{ID: "req-1", Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: "message/stream",
		From: peer.Address(identity.Mainnet), To: server.Address(), Payload: []byte(`{}`), Timestamp: now.Unix()}
	req.Sign(peer)
	raw, _ := req.MarshalJSON()

	final := server.Serve(context.Background(), snap.Inbound{Raw: raw}, func(ev *snap.Message) error {
		fmt.Println(ev.Type, string(ev.Payload))
		return nil
	})
	fmt.Println(final.Type, string(final.Payload))
	// Output:
	// event {"message":"working","progress":0.5,"taskId":"t-1"}
	// event {"message":"working","progress":1,"taskId":"t-1"}
	// response {"task":{"id":"t-1","status":{"state":"completed"}}}
}
