package snaphttp

import (
	"net/http"
	"strconv"

	"github.com/snapnode/snapnode/snap"
)

// serviceStatus is the HTTP status of a service/call answer whose error
// code is code (0 for a reply). The spec makes a service's answer its own,
// not a SNAP message, and lets it use 401 and 403, the one exception to
// its rule that every SNAP error is HTTP 200:
// a request that does not authenticate is 401, a caller off the allowlist
// 403 (2003: over HTTP no transport binds the sender, so 2003 means only
// that), an unknown service 404, and the rest as errors.md maps them: a
// version not supported 400 (the caller's to change, never retried), a
// transport failure behind the service (4xxx) 502.
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
	case code >= 4000 && code < 5000:
		return http.StatusBadGateway
	case code == int(snap.CodeRateLimitExceeded):
		return http.StatusTooManyRequests
	case code == int(snap.CodeServiceUnavailable), code == int(snap.CodeMaintenance):
		return http.StatusServiceUnavailable
	case code == int(snap.CodeVersionNotSupported):
		return http.StatusBadRequest
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
	if e := snap.ResponseError(resp.Payload); e != nil {
		status = serviceStatus(int(e.Code))
		if _, failed := e.Data["cause"]; failed && e.Code == snap.CodeDuplicateMessage {
			// The id spent, then the service failed (snap.Server.spent):
			// the node's failure, not the caller's authentication.
			status = http.StatusInternalServerError
		}
		if after, ok := e.Data["retryAfter"].(float64); ok && after > 0 {
			h.Set("Retry-After", strconv.Itoa(int(after)))
		}
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(resp.Payload)
}
