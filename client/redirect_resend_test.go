package client_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/snap"
)

// A POST answered with a redirect the client does not follow (a 301,
// 302 or 303, which would turn it into a GET; a 307 to another host) was
// answered: the agent did not take it there. It goes on to the card's
// next transport, and is not reported as a request the agent may have
// taken. Before, the written request's failure was marked cut, as if the
// connection had closed before any answer: not sent again without an
// idempotencyKey, ErrNotSentAgain, client.Taken.
func TestFallbackGoesOnAfterARedirectNotFollowed(t *testing.T) {
	const send = `{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]}}`
	for _, tc := range []struct {
		name   string
		status int
		to     string
	}{
		{"301", http.StatusMovedPermanently, "/elsewhere"},
		{"303", http.StatusSeeOther, "/elsewhere"},
		{"307 to another host", http.StatusTemporaryRedirect, "http://another.example/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &attempts{}
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, err := io.ReadAll(r.Body); err != nil {
					return
				}
				log.add("post")
				http.Redirect(w, r, tc.to, tc.status)
			}))
			t.Cleanup(ts.Close)
			card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: ts.URL + "/"}}, "wss://relay.example")
			agent, err := client.ToCard(card, client.NewHTTP(client.HTTPConfig{Key: clientKey}), nostrStub{log: log, err: errors.New("no relay")}, quickFallback)
			if err != nil {
				t.Fatal(err)
			}
			_, err = agent.Send(t.Context(), "message/send", []byte(send))
			if got := log.get(); len(got) < 2 || got[0] != "post" || !slices.Contains(got, "nostr") {
				t.Errorf("attempts %q, want the post, then Nostr (%v)", got, err)
			}
			if errors.Is(err, client.ErrNotSentAgain) || client.Taken(err) {
				t.Errorf("%v: reported as a request the agent may have taken", err)
			}
		})
	}
}
