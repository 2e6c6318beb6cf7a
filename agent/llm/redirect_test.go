package llm_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snapnode/snapnode/agent/llm"
)

// No redirect is followed, whatever its status and wherever it points
// (another host, https, the same host's other port), for a completion or
// the model list: the API key and the prompt go to the base URL and
// nowhere else, and the error names the redirect without the key.
func TestNoRedirectFollowed(t *testing.T) {
	const key = "sk-redirect-secret"
	var hits atomic.Int32
	target := func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("Authorization") != "" {
			t.Errorf("%s %s reached the redirect's target with an Authorization header", r.Method, r.URL)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, okBody)
	}
	other := httptest.NewServer(http.HandlerFunc(target))
	defer other.Close()
	secure := httptest.NewTLSServer(http.HandlerFunc(target))
	defer secure.Close()
	for _, to := range []struct{ name, url string }{
		{"another host", strings.Replace(other.URL, "127.0.0.1", "localhost", 1)},
		{"the same host's other port", other.URL},
		{"https", secure.URL},
	} {
		for _, status := range []int{301, 302, 303, 307, 308} {
			t.Run(fmt.Sprintf("%s %d", to.name, status), func(t *testing.T) {
				hits.Store(0)
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, to.url+r.URL.Path, status)
				}))
				defer srv.Close()
				m, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "m1", APIKey: key})
				if err != nil {
					t.Fatal(err)
				}
				_, err = m.Complete(t.Context(), prompt("x"))
				if err == nil || !strings.Contains(err.Error(), "redirects are not followed") || strings.Contains(err.Error(), key) {
					t.Errorf("Complete: err = %v; want the redirect refused", err)
				}
				err = m.Check(t.Context())
				if err == nil || !strings.Contains(err.Error(), "redirects are not followed") || strings.Contains(err.Error(), key) {
					t.Errorf("Check: err = %v; want the redirect refused", err)
				}
				if n := hits.Load(); n != 0 {
					t.Errorf("the redirect was followed %d times", n)
				}
			})
		}
	}
}
