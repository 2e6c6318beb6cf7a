package llm_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent/llm"
)

// The API key a server echoes is redacted before the server's words are
// cut, not after: a key across the cut of the error object's message (300
// bytes) or of a model's name (100) left its first part in the error,
// which redacting the whole key no longer matched; and the names Check's
// ErrModelNotListed quotes were not redacted at all, so a server listing
// the key as a model's id had Check's error (which the node logs) hold it.
func TestServerKeyRedactedBeforeCut(t *testing.T) {
	const key = "sk-echoed-secret-0123456789abcdef"
	part := key[:12]
	for _, c := range []struct {
		name, path, body string
		call             func(*llm.Client) error
		want             error
	}{
		{"error message, key across the cut", "/v1/chat/completions",
			`{"error":{"message":"` + strings.Repeat("e", 285) + key + `"}}`,
			func(m *llm.Client) error { _, err := m.Complete(t.Context(), prompt("x")); return err }, llm.ErrMalformedResponse},
		{"a model named the key", "/v1/models",
			`{"data":[{"id":"other"},{"id":"` + key + `"}]}`,
			func(m *llm.Client) error { return m.Check(t.Context()) }, llm.ErrModelNotListed},
		{"a model's name, key across the cut", "/v1/models",
			`{"data":[{"id":"other"},{"id":"` + strings.Repeat("n", 85) + key + `"}]}`,
			func(m *llm.Client) error { return m.Check(t.Context()) }, llm.ErrModelNotListed},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != c.path {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, c.body)
			}))
			defer srv.Close()
			m, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "m1", APIKey: key})
			if err != nil {
				t.Fatal(err)
			}
			err = c.call(m)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %.300v; want %v", err, c.want)
			}
			if s := err.Error(); strings.Contains(s, part) {
				t.Errorf("the error holds the API key's first %d bytes: %s", len(part), s)
			}
			if s := fmt.Sprintf("%+v", err); strings.Contains(s, part) {
				t.Errorf("the error, printed %%+v, holds the API key's first %d bytes", len(part))
			}
		})
	}
}
