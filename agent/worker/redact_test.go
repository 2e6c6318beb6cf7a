package worker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/worker"
)

// A worker's error output goes into its violation's reason: the log line,
// the audit record (which cannot be edited afterwards) and the error the
// runtime keeps. The secrets it names are removed before any of them, by
// the runtime's built-in patterns and the operator's, and before the
// reason is cut, which would leave too little of a key to match.
func TestErrorOutputRedacted(t *testing.T) {
	var logged bytes.Buffer
	p, al, _ := pool(t, "crashsecret.py", func(cfg *worker.Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		cfg.Redact = []*regexp.Regexp{regexp.MustCompile(`corp-token-\w+`)}
	})
	_, err := p.Complete(context.Background(), prompt("job-1", 0, ""))
	if !errors.Is(err, agent.ErrWorkerFailed) || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Fatalf("err = %v; want agent.ErrWorkerFailed with the error output redacted", err)
	}
	es := al.Entries()
	if len(es) != 1 {
		t.Fatalf("audit: %+v; want the violation recorded", es)
	}
	for where, s := range map[string]string{"error": err.Error(), "audit": es[0].Reason, "log": logged.String()} {
		for _, secret := range []string{"live0123456789", "SECRETVALUE42", "cut0123"} {
			if strings.Contains(s, secret) {
				t.Errorf("the %s holds the secret %q: %s", where, secret, s)
			}
		}
	}
}
