package snaphttp_test

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

func getCard(t *testing.T, e *env) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Get(e.base + snaphttp.WellKnownPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func health(t *testing.T, e *env) snaphttp.Health {
	t.Helper()
	return healthFrom(t, http.DefaultClient, e)
}

// The well-known card: the headers the reference SDK serves it with (JSON,
// CORS, caching), a document that verifies (BIP-340 over SHA-256 of the
// card's JCS, "|" and the timestamp), whose publicKey is Q of the identity;
// OPTIONS gets 204 with CORS.
func TestWellKnownCard(t *testing.T) {
	clock := testclock.New(time.Unix(1_800_000_000, 0))
	e := start(t, nil, func(c *snaphttp.Config) { c.Now = clock.Now })
	resp, b := getCard(t, e)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	for h, want := range map[string]string{
		"Content-Type": "application/json", "Access-Control-Allow-Origin": "*", "Cache-Control": "public, max-age=300",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	card, sc, err := snap.VerifySignedCard(b)
	if err != nil {
		t.Fatal(err)
	}
	q := serverKey.OutputKey()
	if card.Identity != addr(serverKey) || sc.PublicKey != hex.EncodeToString(q[:]) || sc.Timestamp != 1_800_000_000 {
		t.Errorf("card %s, publicKey %s, timestamp %d", card.Identity, sc.PublicKey, sc.Timestamp)
	}

	req, _ := http.NewRequest(http.MethodOptions, e.base+snaphttp.WellKnownPath, nil)
	req.Header.Set("Origin", "https://elsewhere.example")
	req.Header.Set("Access-Control-Request-Method", "GET")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), "GET") {
		t.Errorf("OPTIONS: %d %v", resp.StatusCode, resp.Header)
	}

	// The client discovers it the SDK's way, with or without a trailing
	// slash.
	for _, base := range []string{e.base, e.base + "/"} {
		got, _, err := e.client.Discover(context.Background(), base)
		if err != nil || got.Name != "agent" {
			t.Errorf("Discover(%s): %v %v", base, got, err)
		}
	}
}

// The signature is kept while the card is the same and younger than
// CardResign; a changed card is signed at once; an old signature is
// replaced with one of a fresh timestamp.
func TestWellKnownCardResigning(t *testing.T) {
	clock := testclock.New(time.Unix(1_800_000_000, 0))
	var name atomic.Value
	name.Store("first")
	e := start(t, nil, func(c *snaphttp.Config) {
		c.Now = clock.Now
		c.CardResign = time.Minute
		c.Card = func() *snap.Card { return testCard(name.Load().(string)) }
	})
	_, first := getCard(t, e)
	clock.Advance(30 * time.Second)
	if _, again := getCard(t, e); string(again) != string(first) {
		t.Errorf("same card within a minute signed again:\n%s\n%s", first, again)
	}

	name.Store("second")
	_, changed := getCard(t, e)
	card, sc, err := snap.VerifySignedCard(changed)
	if err != nil || card.Name != "second" || sc.Timestamp != 1_800_000_030 {
		t.Errorf("changed card: %v %+v %v", card, sc, err)
	}

	clock.Advance(time.Minute)
	_, later := getCard(t, e)
	card, sc, err = snap.VerifySignedCard(later)
	if err != nil || card.Name != "second" || sc.Timestamp != 1_800_000_090 {
		t.Errorf("card after CardResign: %+v %v", sc, err)
	}
}

// Discover refuses a card that fails any of the checks.
func TestDiscoverRefuses(t *testing.T) {
	good, err := snap.SignCard(testCard("agent"), serverKey, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	goodJSON, _ := json.Marshal(good)
	forged := *good
	forged.Card = json.RawMessage(strings.Replace(string(good.Card), `"agent"`, `"evil"`, 1))
	forgedJSON, _ := json.Marshal(forged)
	otherSigned, _ := snap.SignCard(func() *snap.Card { c := testCard("x"); c.Identity = addr(otherKey); return c }(), otherKey, time.Now())
	swapped := *good
	swapped.PublicKey, swapped.Sig = otherSigned.PublicKey, otherSigned.Sig
	swappedJSON, _ := json.Marshal(swapped)
	cases := []struct {
		name   string
		status int
		body   []byte
		want   error
	}{
		{"valid", 200, goodJSON, nil},
		{"card changed after signing", 200, forgedJSON, snap.CodeSignatureInvalid},
		{"another key's signature", 200, swappedJSON, snap.CodeSignatureInvalid},
		{"not a card", 200, []byte(`{"card":{}}`), snap.CodeAgentCardInvalid},
		{"404", 404, []byte(`{}`), nil},
	}
	cl := client.NewHTTP(client.HTTPConfig{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != snaphttp.WellKnownPath {
					http.NotFound(w, r)
					return
				}
				w.WriteHeader(tc.status)
				w.Write(tc.body)
			}))
			defer ts.Close()
			card, _, err := cl.Discover(context.Background(), ts.URL)
			var se *client.StatusError
			switch {
			case tc.status != 200:
				if !errors.As(err, &se) || se.StatusCode != tc.status {
					t.Errorf("error %v, want HTTP %d", err, tc.status)
				}
			case tc.want == nil:
				if err != nil || card.Identity != addr(serverKey) {
					t.Errorf("%v %v", card, err)
				}
			default:
				if !errors.Is(err, tc.want) {
					t.Errorf("error %v, want %v", err, tc.want)
				}
			}
		})
	}
}
