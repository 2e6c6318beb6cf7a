// Package servicecall answers SNAP's agent-to-service calls, service/call:
// requests that may leave out to (a service is not addressed as an
// agent), authenticated by their signature and an allowlist of caller
// identities, routed by name to handlers registered in Go. A handler's
// reply is the service's own JSON object, not a task.
//
//	reg, err := servicecall.New(servicecall.Config{Allow: []string{"bc1p…"}})
//	if err != nil { … }
//	reg.Handle("weather", func(ctx context.Context, c *servicecall.Call) (any, error) {
//		var args struct {
//			City string `json:"city"`
//		}
//		if err := c.Bind(&args); err != nil {
//			return nil, err // 1004 naming the argument
//		}
//		return map[string]any{"city": args.City, "celsius": 21}, nil
//	})
//	router.Handle(servicecall.Method, reg.Serve)
//
// The payload of a call is {"name": string, "arguments"?: object}. Over
// Nostr and WebSocket the reply travels as the payload of a signed SNAP
// response; over HTTP the transport sends the reply object itself, with
// 401 and 403 for callers it does not accept (see snaphttp).
//
// What a Registry answers, in order:
//   - a caller not on the allowlist: 2003 with data {"field": "from",
//     "constraint": "allowlist"}, before anything of the payload is read,
//     so a stranger learns nothing of the services offered;
//   - a malformed payload: 1004 naming the field and the rule;
//   - an unknown name: 3005 with data {"skill", "available"};
//   - otherwise the handler's reply. A handler's *snap.Error reaches the
//     caller as it is; any other error is 5001 and is logged, not shown;
//   - a call still running when its service's time-out passes (the one
//     given to HandleTimeout, else Config.Timeout) has its context ended
//     and, unless the handler returns a *snap.Error, is 5003 with data
//     {"service", "timeout"} (seconds).
//
// A call's id is spent before its handler runs (the snap.Validator
// records it: a service may act outside any database a later write
// could join), so a snap.Server answers a call that failed with 5001,
// 5002 or 5003 with 2006, its data.cause the failure: the call may have
// acted, and is sent again only as a new request with a new id. The
// server's request time-out is no bound of a call's
// (snap.ServerConfig.SelfBounded): its service's own is.
package servicecall
