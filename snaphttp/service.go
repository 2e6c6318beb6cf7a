package snaphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// serviceStatus is the HTTP status of a service/call answer whose error
// code is code (0 for a reply). The spec makes a service's answer its own,
// not a SNAP message, and lets it use 401 and 403 (SPEC-NOTES 1.8, 4.3):
// a request that does not authenticate is 401, a caller off the allowlist
// 403 (2003: over HTTP no transport binds the sender, so 2003 means only
// that), an unknown service 404, and the rest as errors.md maps them.
func serviceStatus(code int) int {
	switch {
	case code == 0:
		return http.StatusOK
	case code == int(snap.CodeIdentityMismatch):
		return http.StatusForbidden
	case code >= 2000 && code < 3000:
		return http.StatusUnauthorized
	case code == int(snap.CodeSkillNotFound):
		return http.StatusNotFound
	case code == int(snap.CodeRateLimitExceeded):
		return http.StatusTooManyRequests
	case code == int(snap.CodeServiceUnavailable), code == int(snap.CodeMaintenance):
		return http.StatusServiceUnavailable
	case code >= 5000:
		return http.StatusInternalServerError
	default:
		return http.StatusBadRequest
	}
}

// writeServiceReply sends the answer to a service/call over HTTP: the
// payload of resp, the service's reply object or {"error": …}, as the
// body, with the status serviceStatus gives it and Retry-After when the
// error says when to come back.
func writeServiceReply(w http.ResponseWriter, resp *snap.Message) {
	status, h := http.StatusOK, w.Header()
	if e := ResponseError(resp.Payload); e != nil {
		status = serviceStatus(int(e.Code))
		if after, ok := e.Data["retryAfter"].(float64); ok && after > 0 {
			h.Set("Retry-After", strconv.Itoa(int(after)))
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(resp.Payload)
}

// Call calls the service name with args (marshalled to a JSON object; nil
// leaves the arguments out) at url, the service's /snap endpoint, and
// returns its reply object. to names the service's identity, or is empty
// to leave to out, as agent-to-service calls may. The request is signed
// with the client's key. The reply is the service's own and is not
// signed: only the transport (HTTPS) vouches for it. A refusal is a
// *StatusError whose Err is the SNAP error the service gave.
func (c *Client) Call(ctx context.Context, url, to, name string, args any) (json.RawMessage, error) {
	payload := map[string]any{"name": name}
	if args != nil {
		payload["arguments"] = args
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("snaphttp: service arguments: %w", err)
	}
	network := identity.Mainnet
	if to != "" {
		addr, err := identity.ParseAddress(to)
		if err != nil {
			return nil, fmt.Errorf("snaphttp: to: %w", err)
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
	resp, err := c.post(ctx, url, &exchange{c: c, req: req, body: raw}, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	reply, err := c.readAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if !json.Valid(reply) || !bytes.HasPrefix(bytes.TrimSpace(reply), []byte("{")) {
		return nil, fmt.Errorf("%w: the service's reply is not a JSON object", ErrInvalidResponse)
	}
	return json.RawMessage(reply), nil
}
