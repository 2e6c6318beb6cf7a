package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// Call calls the service name with args (marshalled to a JSON object; nil
// leaves the arguments out) at url, the service's /snap endpoint, and
// returns its reply object. to names the service's identity, or is empty
// to leave to out, as agent-to-service calls may. The request is signed
// with the client's key. The reply is the service's own and is not
// signed: only the transport (HTTPS) vouches for it. A refusal is a
// *StatusError whose Err is the SNAP error the service gave.
func (c *HTTP) Call(ctx context.Context, url, to, name string, args any) (json.RawMessage, error) {
	payload := map[string]any{"name": name}
	if args != nil {
		payload["arguments"] = args
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("client: service arguments: %w", err)
	}
	network := identity.Mainnet
	if to != "" {
		addr, err := identity.ParseAddress(to)
		if err != nil {
			return nil, fmt.Errorf("client: to: %w", err)
		}
		network = addr.Network
	}
	req := &snap.Message{Method: snap.MethodServiceCall, To: to, Payload: body}
	if err := c.sign(req, network); err != nil {
		return nil, err
	}
	raw, err := req.MarshalJSON()
	if err != nil {
		return nil, err
	}
	reply, err := c.postRead(ctx, url, &exchange{req: req, body: raw})
	if err != nil {
		return nil, err
	}
	if !json.Valid(reply) || !bytes.HasPrefix(bytes.TrimSpace(reply), []byte("{")) {
		return nil, fmt.Errorf("%w: the service's reply is not a JSON object", ErrInvalidResponse)
	}
	return json.RawMessage(reply), nil
}
