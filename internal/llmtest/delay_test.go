package llmtest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDelayAbortedByClient proves a delayed reply ends when its client
// goes away: httptest's Close waits for every handler, so it returns only
// if the hour-long delay was cut short (the server's own shutdown signal,
// s.done, is not closed here).
func TestDelayAbortedByClient(t *testing.T) {
	s := New(t)
	s.Push(Reply{Content: "late", Delay: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	if err := s.WaitCalls(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client error = %v, want context.Canceled", err)
	}

	closed := make(chan struct{})
	go func() { s.srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(time.Minute): // a guard against a hang, not a timing assertion
		t.Fatal("the server's handler still waits after its client went away")
	}
}
