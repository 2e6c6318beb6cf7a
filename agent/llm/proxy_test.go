package llm_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent/llm"
)

// The client honours the proxy variables of its environment
// (HTTP_PROXY, HTTPS_PROXY, NO_PROXY), as Go's read them once per process:
// a request to a base URL of plain http goes to the proxy whole, its
// API key included; one to loopback never goes through a proxy. The test
// runs itself again with the variables set, since Go reads them once.
func TestProxyFromEnvironment(t *testing.T) {
	if os.Getenv("SNAPNODE_LLM_PROXY_CHILD") == "1" {
		proxyChild(t)
		return
	}
	type seen struct{ url, auth string }
	got := make(chan seen, 4)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.URL.String(), r.Header.Get("Authorization")}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, okBody)
	}))
	defer proxy.Close()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestProxyFromEnvironment$", "-test.v")
	cmd.Env = append(os.Environ(), "SNAPNODE_LLM_PROXY_CHILD=1", "HTTP_PROXY="+proxy.URL, "HTTPS_PROXY="+proxy.URL,
		"NO_PROXY=", "http_proxy=", "https_proxy=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child failed: %v\n%s", err, out)
	}
	close(got)
	var urls []string
	for s := range got {
		if s.auth != "Bearer sk-proxied" {
			t.Errorf("the proxy saw Authorization %q", s.auth)
		}
		urls = append(urls, s.url)
	}
	if want := "http://models.example/v1/chat/completions"; strings.Join(urls, " ") != want {
		t.Fatalf("the proxy was asked for %q; want %q alone\n%s", urls, want, out)
	}
}

// proxyChild asks a base URL through the proxy of its environment, and
// one on loopback, which must not reach it.
func proxyChild(t *testing.T) {
	m, err := llm.New(llm.Config{BaseURL: "http://models.example/v1", Model: "m1", APIKey: "sk-proxied"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.Complete(t.Context(), prompt("x"))
	if err != nil || c.Text != "A" {
		t.Fatalf("through the proxy: %+v, %v", c, err)
	}
	direct := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, strings.Replace(okBody, `"A"`, `"direct"`, 1))
	}))
	defer direct.Close()
	m, err = llm.New(llm.Config{BaseURL: direct.URL + "/v1", Model: "m1", APIKey: "sk-proxied"})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := m.Complete(t.Context(), prompt("x")); err != nil || c.Text != "direct" {
		t.Fatalf("loopback: %+v, %v; want the server asked directly", c, err)
	}
}
