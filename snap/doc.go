// Package snap implements the SNAP v0.1 message layer: the envelope, its
// RFC 8785 canonical form, the signature input, BIP-340 signing and
// verification, validation in the spec's order with typed errors, the
// replay store interface, and Agent Cards with the signed well-known card.
// It does no I/O and knows nothing of Nostr or HTTP.
//
// Receiving: a Validator runs syntax, structure, types, constraints and
// semantics (see Stage), then the timestamp window, the signature, the
// replay store and the recipient check. The first failure is returned as an
// *Error carrying its SNAP code and data:
//
//	v := snap.NewValidator(snap.Config{
//		Self:   self,                           // our address
//		Replay: snap.NewMemoryReplayStore(0),   // or a durable store
//	})
//	msg, err := v.Validate(ctx, raw)
//	var se *snap.Error
//	if errors.As(err, &se) {
//		// reply with {"error": se}: se.Code, se.Message, se.Data
//	}
//	if msg.Type != snap.TypeRequest { /* never route it as a request */ }
//
// Sending: fill a Message, Sign it with the sender's identity.Key (the
// payload is canonicalized once) and serialize it:
//
//	m := &snap.Message{ID: id, Version: snap.ProtocolVersion, From: from, To: to,
//		Type: snap.TypeRequest, Method: "message/send", Payload: payload,
//		Timestamp: time.Now().Unix()}
//	if err := m.Sign(key); err != nil { ... }
//	out, err := m.MarshalJSON()
//
// Serving: a Server validates each inbound message, routes requests to the
// Router's handlers and returns the signed response, errors included.
// Streaming methods (message/stream, tasks/resubscribe) are registered with
// HandleStream; a transport that can carry events calls Stream, which
// sends each event as a signed "event" message before returning the final
// response, and one that cannot calls Respond, which returns the final
// response alone:
//
//	router.HandleStream("message/stream", func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
//		// emit may wait for the peer: call it from this goroutine,
//		// holding no lock others wait for.
//		if err := emit(progress); err != nil {
//			return nil, err // the transport is gone
//		}
//		return final, nil
//	})
//	resp := server.Serve(ctx, snap.Inbound{Raw: raw}, func(ev *snap.Message) error {
//		return writeFrame(ev) // in order, one at a time
//	})
//
// Input that is not I-JSON (duplicate names, lone surrogates, numbers beyond
// a double) is refused before canonicalization, since two parsers could read
// it two ways. Unknown envelope fields are ignored and never signed.
package snap
