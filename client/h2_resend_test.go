package client_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/snap"
)

// Over HTTP/2 the resend rule reads the ends as over HTTP/1: a POST
// whose stream was reset once its body went out is sent again only with
// an idempotencyKey; one left without headers until the client's
// time-out is not sent again, key or not.
func TestResendRuleOverHTTP2(t *testing.T) {
	const (
		send  = `{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]}}`
		keyed = `{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]},"idempotencyKey":"k1"}`
	)
	for _, tc := range []struct {
		end, payload string
		once         bool
	}{
		{"reset", send, true},
		{"reset", keyed, false},
		{"quiet", send, true},
		{"quiet", keyed, true},
	} {
		log := &attempts{}
		done := make(chan struct{})
		ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ProtoMajor != 2 {
				t.Errorf("HTTP/%d.%d, want HTTP/2", r.ProtoMajor, r.ProtoMinor)
			}
			if _, err := io.ReadAll(r.Body); err != nil {
				return
			}
			log.add("post")
			if tc.end == "quiet" {
				select {
				case <-r.Context().Done():
				case <-done:
				}
				return
			}
			panic(http.ErrAbortHandler) // RST_STREAM
		}))
		ts.EnableHTTP2 = true
		ts.Config.ErrorLog = nil
		ts.StartTLS()
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs},
			ForceAttemptHTTP2: true, ResponseHeaderTimeout: 50 * time.Millisecond}}
		card := fallbackCard([]snap.Endpoint{{Protocol: "http", URL: ts.URL + "/"}}, "wss://relay.example")
		agent, err := client.ToCard(card, client.NewHTTP(client.HTTPConfig{Key: clientKey, HTTP: hc}), nostrStub{log: log, err: errors.New("no relay")}, quickFallback)
		if err != nil {
			t.Fatal(err)
		}
		_, err = agent.Send(t.Context(), "message/send", []byte(tc.payload))
		close(done)
		ts.Close()
		want := []string{"post", "post", "post", "nostr"}
		if tc.once {
			want = []string{"post"}
		}
		if got := log.get(); !slices.Equal(got, want) {
			t.Errorf("%s, %s: attempts %q, want %q (%v)", tc.end, tc.payload, got, want, err)
		}
		if errors.Is(err, client.ErrNotSentAgain) != tc.once || !client.Taken(err) {
			t.Errorf("%s, %s: %v; want ErrNotSentAgain: %v, client.Taken", tc.end, tc.payload, err, tc.once)
		}
	}
}
