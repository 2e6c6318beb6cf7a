package llm_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snapnode/snapnode/agent/llm"
)

const okBody = `{"model":"m1","choices":[{"message":{"role":"assistant","content":"A"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":5}}`

func completeFrom(t *testing.T, h http.HandlerFunc, cfg llm.Config) (string, error) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg.BaseURL, cfg.Model = srv.URL+"/v1", "m1"
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Complete(t.Context(), prompt("x"))
	if err != nil {
		return "", err
	}
	return got.Text, nil
}

// A success body is exactly one JSON object: go-openai's decoder alone
// would read the first of two, ignore trailing data, take the last of
// duplicate names and replace invalid UTF-8.
func TestMalformedSuccessBody(t *testing.T) {
	for _, c := range []struct{ name, ctype, body, why string }{
		{"two objects", "application/json", okBody + `{"choices":[{"message":{"content":"B"}}]}`, "data after the JSON value"},
		{"trailing data", "application/json", okBody + `garbage`, "data after the JSON value"},
		{"duplicate names", "application/json", `{"choices":[{"message":{"content":"A"}}],"choices":[{"message":{"content":"B"}}]}`, "duplicate"},
		// encoding/json, under go-openai, matches names without regard
		// to case: it would read "B" where the server also wrote "A".
		{"names differing in case", "application/json", `{"choices":[{"message":{"content":"A","Content":"B"}}]}`, "duplicate"},
		{"names differing in case, at the top", "application/json", `{"choices":[{"message":{"role":"assistant","content":"A"}}],"CHOICES":[{"message":{"content":"B"}}]}`, "duplicate"},
		{"invalid UTF-8", "application/json", `{"choices":[{"message":{"content":"` + "\xff" + `"}}]}`, "UTF-8"},
		{"unasked stream", "text/event-stream; charset=utf-8", "data: " + okBody + "\n\ndata: [DONE]\n\n", "text/event-stream"},
	} {
		t.Run(c.name, func(t *testing.T) {
			text, err := completeFrom(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", c.ctype)
				io.WriteString(w, c.body)
			}, llm.Config{})
			if !errors.Is(err, llm.ErrMalformedResponse) || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("Complete = %q, %v: want ErrMalformedResponse saying %q", text, err, c.why)
			}
		})
	}
	if text, err := completeFrom(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "\n "+okBody+"\n") }, llm.Config{}); err != nil || text != "A" {
		t.Fatalf("white space around the object: %q, %v", text, err)
	}
}

// A redirect is not followed: Go would send the Authorization header to
// another port of the same host, and a 307's body (the prompt) anywhere.
func TestRedirectNotFollowed(t *testing.T) {
	var hit atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit.Store(true)
		io.WriteString(w, okBody)
	}))
	defer other.Close()
	_, err := completeFrom(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/v1/chat/completions", http.StatusTemporaryRedirect)
	}, llm.Config{APIKey: "sk-secret"})
	if err == nil || !strings.Contains(err.Error(), "redirects are not followed") || strings.Contains(err.Error(), "sk-secret") {
		t.Fatalf("err = %v: want the redirect refused", err)
	}
	if hit.Load() {
		t.Fatal("the redirect was followed")
	}
}

// A 3xx answer is no completion: go-openai decodes every status under 400
// as a success, so a 3xx without a Location (which Go's client returns as
// it is, followed or not) would be read as the model's answer, past the
// checks a success body gets.
func TestRedirectStatusIsNoAnswer(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
	}{
		{http.StatusMultipleChoices, okBody},
		{http.StatusFound, okBody},
		{http.StatusNotModified, ""},
		{http.StatusMultipleChoices, `{"choices":[{"message":{"content":"A"}}],"choices":[{"message":{"content":"B"}}]}`},
	} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			text, err := completeFrom(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			}, llm.Config{})
			if err == nil {
				t.Fatalf("HTTP %d answered %q: want an error", c.status, text)
			}
		})
	}
}
