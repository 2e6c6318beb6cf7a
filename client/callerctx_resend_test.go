package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/snap"
)

// The caller's end of an exchange (its context canceled, or past its
// deadline) once a POST went out is neither a quiet agent nor a cut
// connection: nothing is sent again, to the endpoint or the card's next
// transport, whatever the method or key, and the error is the caller's.
func TestCallersEndIsNotResent(t *testing.T) {
	const keyed = `{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]},"idempotencyKey":"k1"}`
	for _, how := range []string{"cancel", "deadline"} {
		for _, method := range []string{"message/send", "tasks/get"} {
			log := &attempts{}
			posted := make(chan struct{}, 8)
			done := make(chan struct{})
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, err := io.ReadAll(r.Body); err != nil {
					return
				}
				log.add("post")
				posted <- struct{}{}
				select {
				case <-r.Context().Done():
				case <-done:
				}
			}))
			card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: ts.URL + "/"}}, "wss://relay.example")
			agent, err := client.ToCard(card, client.NewHTTP(client.HTTPConfig{Key: clientKey}), nostrStub{log: log}, quickFallback)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancelCause(t.Context())
			want := context.Canceled
			if how == "deadline" {
				want = context.DeadlineExceeded
			}
			go func() {
				<-posted
				cancel(want)
			}()
			_, err = agent.Send(ctx, method, []byte(keyed))
			close(done)
			ts.Close()
			if got := log.get(); !slices.Equal(got, []string{"post"}) {
				t.Errorf("%s, %s: attempts %q, want one post (%v)", how, method, got, err)
			}
			if !errors.Is(err, want) || errors.Is(err, client.ErrNotSentAgain) {
				t.Errorf("%s, %s: %v; want the caller's %v", how, method, err, want)
			}
		}
	}
}
