package delegate_test

import (
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/delegate"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/tasks"
)

// What a delegate says when it fails reaches the node's log, the audit
// log (which cannot be edited afterwards) and the job's reason: an HTTP
// endpoint's error body, through the card's fallback, and a SNAP error's
// message, through the violation. The secrets they name are removed
// first, by the runtime's built-in patterns and the operator's, as from
// an external worker's error output.
func TestDelegateFailureRedacted(t *testing.T) {
	const (
		key   = "sk-live-ABCDEF0123456789abcdef"
		token = "corp-token-SECRETVALUE42"
	)
	failing := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "upstream refused "+key+" and "+token, http.StatusBadGateway)
		})
	}
	var logged testutil.LockedBuffer
	d, a, _ := setupHTTP(t, func(call) *tasks.Task {
		return &tasks.Task{Status: tasks.Status{Message: "calling the API with " + key + " failed; " + token + " refused"}}
	}, failing, func(c *delegate.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		c.Redact = []*regexp.Regexp{regexp.MustCompile(`corp-token-\w+`)}
	}, withHTTP(true), once)
	_, err := d.Complete(t.Context(), prompt("job-1", 0))
	if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "the delegate answered step 0 with an error") {
		t.Fatalf("err = %v; want agent.ErrWorkerFailed, the delegate's error response", err)
	}
	es := a.Entries()
	if len(es) != 1 {
		t.Fatalf("audit: %+v; want the violation recorded", es)
	}
	if !strings.Contains(logged.String(), "upstream refused") {
		t.Fatalf("log: %s; want the endpoint's failure logged", logged.String())
	}
	for where, s := range map[string]string{"error (the job's reason)": err.Error(), "audit": es[0].Reason, "log": logged.String()} {
		if !strings.Contains(s, "[REDACTED]") {
			t.Errorf("the %s holds no [REDACTED]: %s", where, s)
		}
		for _, secret := range []string{"ABCDEF0123456789", "SECRETVALUE42"} {
			if strings.Contains(s, secret) {
				t.Errorf("the %s holds the secret %q: %s", where, secret, s)
			}
		}
	}
}
