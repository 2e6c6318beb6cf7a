package servicecall_test

import (
	"context"
	"fmt"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/servicecall"
	"github.com/snapnode/snapnode/snap"
)

// A service registered by name answers a caller on its allowlist; the
// request leaves out to, as agent-to-service calls do.
func Example() {
	svcKey, _ := identity.Generate()
	caller, _ := identity.Generate()

	reg, _ := servicecall.New(servicecall.Config{Allow: []string{caller.Address(identity.Mainnet)}})
	reg.Handle("weather", func(ctx context.Context, c *servicecall.Call) (any, error) {
		var args struct {
			City string `json:"city"`
		}
		if err := c.Bind(&args); err != nil {
			return nil, err
		}
		return map[string]any{"city": args.City, "celsius": 21}, nil
	})
	router := snap.NewRouter()
	router.Handle(servicecall.Method, reg.Serve)
	server := snap.NewServer(snap.ServerConfig{Key: svcKey, Router: router,
		Validator: snap.NewValidator(snap.Config{Self: svcKey.Address(identity.Mainnet), Replay: snap.NewMemoryReplayStore(0)})})

	call := func(id, args string) {
		req := &snap.Message{ID: id, Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: servicecall.Method,
			From: caller.Address(identity.Mainnet), Timestamp: time.Now().Unix(),
			Payload: []byte(`{"name":"weather","arguments":` + args + `}`)}
		req.Sign(caller)
		raw, _ := req.MarshalJSON()
		fmt.Println(string(server.Respond(context.Background(), snap.Inbound{Raw: raw}).Payload))
	}
	call("call-1", `{"city":"Lisbon"}`)
	call("call-2", `{"town":"Porto"}`)
	// Output:
	// {"celsius":21,"city":"Lisbon"}
	// {"error":{"code":1004,"data":{"constraint":"additionalProperties","expected":"a known argument","field":"payload.arguments.town","received":"town"},"message":"invalid payload.arguments.town: additionalProperties"}}
}
