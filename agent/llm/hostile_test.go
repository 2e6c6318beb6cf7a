package llm_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
)

// A server that sends its headers and then drips its body a byte at a
// time never holds the client past Config.Timeout.
func TestSlowDripBodyTimesOut(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	_, err := completeFrom(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"choices":[{"message":{"content":"`)
		w.(http.Flusher).Flush()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-tick.C:
				io.WriteString(w, "x")
				w.(http.Flusher).Flush()
			}
		}
	}, llm.Config{Timeout: 200 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
}

// A gzip body that expands past the cap is refused when the cap is
// reached, counting the bytes after decompression (Go's transport
// decompresses a gzip answer to a request it asked gzip for).
func TestGzipBombRefused(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	io.WriteString(zw, `{"choices":[{"message":{"content":"`)
	zw.Write(make([]byte, 64<<20))
	zw.Close()
	if z.Len() > 1<<20 {
		t.Fatalf("the bomb is %d bytes compressed", z.Len())
	}
	_, err := completeFrom(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(z.Bytes())
	}, llm.Config{MaxResponseBytes: 64 << 10})
	var ae *agent.AnsweredError
	if !errors.Is(err, llm.ErrResponseTooLarge) || !errors.As(err, &ae) || ae.AnswerBytes != 64<<10 {
		t.Fatalf("err = %#v, want ErrResponseTooLarge counted at the cap", err)
	}

	// A small gzip answer is read.
	var small bytes.Buffer
	zw = gzip.NewWriter(&small)
	io.WriteString(zw, okBody)
	zw.Close()
	text, err := completeFrom(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(small.Bytes())
	}, llm.Config{})
	if err != nil || text != "A" {
		t.Fatalf("small gzip answer: %q, %v", text, err)
	}
}

// An endless event stream (no [DONE]) is refused at the size cap or the
// time-out, whichever comes first: the client never asked for a stream.
func TestEndlessStreamRefused(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	_, err := completeFrom(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			default:
			}
			io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n")
		}
	}, llm.Config{MaxResponseBytes: 4096, Timeout: 10 * time.Second})
	if !errors.Is(err, llm.ErrResponseTooLarge) {
		t.Fatalf("err = %v, want ErrResponseTooLarge", err)
	}
}

// A 200 whose body is an error object in place of the choices (as some
// proxies answer) is refused, and the error says what the server said,
// without the API key it may echo.
func TestErrorObjectInSuccess(t *testing.T) {
	for _, body := range []string{
		`{"error":{"message":"upstream model overloaded (key sk-echo-secret)","code":502}}`,
		`{"error":"upstream model overloaded (key sk-echo-secret)"}`,
	} {
		_, err := completeFrom(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}, llm.Config{APIKey: "sk-echo-secret"})
		var ae *agent.AnsweredError
		if !errors.As(err, &ae) || !errors.Is(err, llm.ErrMalformedResponse) ||
			!strings.Contains(err.Error(), "upstream model overloaded") || strings.Contains(err.Error(), "sk-echo-secret") {
			t.Errorf("%s: err = %v, want an AnsweredError with the server's message, the key redacted", body, err)
		}
	}
}

// A TLS server whose certificate the client does not trust is a transport
// error, and the prompt is not sent.
func TestUntrustedCertificate(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the request reached the handler")
	}))
	defer srv.Close()
	c, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "m1", APIKey: "sk-tls-secret"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(t.Context(), prompt("x"))
	var me *agent.ModelError
	if err == nil || errors.As(err, &me) || !strings.Contains(err.Error(), "certificate") || strings.Contains(err.Error(), "sk-tls-secret") {
		t.Fatalf("err = %v, want a certificate error", err)
	}
}

// A server's response headers are bounded as its body is: a success
// answer behind megabytes of headers is refused, not read into memory.
func TestHugeHeadersRefused(t *testing.T) {
	_, err := completeFrom(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := range 64 {
			w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("x", 16<<10))
		}
		io.WriteString(w, okBody)
	}, llm.Config{})
	if err == nil || !strings.Contains(err.Error(), "header") {
		t.Fatalf("err = %v, want the headers refused", err)
	}
}

// An answer of many small elements (choices, tool calls) is read in
// memory of the order of its size, not a hundred times it: the client
// decodes the first few and counts the rest. Before, 300,000 empty
// choices (900 KB) took 150 MB to read.
func TestManyChoicesReadInBoundedMemory(t *testing.T) {
	const n = 300_000
	for _, c := range []struct{ name, body, why string }{
		{"choices", `{"choices":[` + strings.Repeat(`{},`, n) + `{}],"usage":{"prompt_tokens":10,"completion_tokens":5}}`,
			"300001 choices"},
		{"tool calls", `{"choices":[{"message":{"content":null,"tool_calls":[` + strings.Repeat(`{},`, n) + `{}]}}],"usage":{"prompt_tokens":10,"completion_tokens":5}}`,
			""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := bodyClient(t, c.body)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			got, err := m.Complete(t.Context(), prompt("x"))
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16*uint64(len(c.body)) {
				t.Errorf("reading a body of %d bytes allocated %d MB", len(c.body), alloc>>20)
			}
			if c.why == "" {
				if err != nil || len(got.ToolCalls) != 8 {
					t.Fatalf("Complete = %+v, %v; want 8 tool calls named", got, err)
				}
				return
			}
			var ae *agent.AnsweredError
			if !errors.Is(err, llm.ErrMalformedResponse) || !strings.Contains(err.Error(), c.why) ||
				!errors.As(err, &ae) || ae.PromptTokens != 10 || ae.CompletionTokens != 5 {
				t.Fatalf("err = %v; want ErrMalformedResponse saying %q, with the usage", err, c.why)
			}
		})
	}
}

// A model list of many entries is read in memory of the order of its
// size and kept as what the client needs of it (Config.Model's entry,
// the first names, how many): before, 300,000 empty entries (900 KB)
// allocated 107 MB and the client kept 21 MB of them for as long as it
// lived. The names Check's error gives are cut.
func TestLongModelListKeptSmall(t *testing.T) {
	const n = 300_000
	for _, c := range []struct{ name, body string }{
		{"many entries", `{"data":[` + strings.Repeat(`{},`, n) + `{"id":"m1","max_model_len":4096}]}`},
		{"long names", `{"data":[{"id":"a` + strings.Repeat("x", 400<<10) + `"},{"id":"b` + strings.Repeat("y", 400<<10) + `"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := bodyClient(t, c.body)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			tokens, err := m.ContextTokens(t.Context())
			runtime.GC()
			runtime.ReadMemStats(&after)
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16*uint64(len(c.body)) {
				t.Errorf("reading a list of %d bytes allocated %d MB", len(c.body), alloc>>20)
			}
			if kept := int64(after.HeapAlloc) - int64(before.HeapAlloc); kept > 1<<20 {
				t.Errorf("the client keeps %d KB of a list of %d bytes", kept>>10, len(c.body))
			}
			checked := m.Check(t.Context())
			runtime.KeepAlive(m)
			if c.name == "many entries" {
				if err != nil || tokens != 4096 || checked != nil {
					t.Fatalf("ContextTokens = %d, %v, Check = %v; want 4096 and the model listed", tokens, err, checked)
				}
				return
			}
			if !errors.Is(checked, llm.ErrModelNotListed) || len(checked.Error()) > 1000 {
				t.Fatalf("Check = %.300v… (%d bytes); want ErrModelNotListed, its names cut", checked, len(checked.Error()))
			}
		})
	}
}

// An API key bound for plain http on another machine crosses the network
// in the clear, for anyone on the path to read: the client says so when
// it is made. Loopback, https and no key are not warned of.
func TestPlainHTTPKeyWarned(t *testing.T) {
	for _, c := range []struct {
		url, key string
		warn     bool
	}{
		{"http://192.0.2.7:8000/v1", "sk-plain", true},
		{"http://models.example:8000/v1", "sk-plain", true},
		{"http://[2001:db8::7]:8000/v1", "sk-plain", true},
		{"http://127.0.0.1:11434/v1", "sk-plain", false},
		{"http://[::1]:11434/v1", "sk-plain", false},
		{"http://localhost:11434/v1", "sk-plain", false},
		{"https://models.example/v1", "sk-plain", false},
		{"http://192.0.2.7:8000/v1", "", false},
	} {
		var logs bytes.Buffer
		if _, err := llm.New(llm.Config{BaseURL: c.url, Model: "m1", APIKey: c.key,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
			t.Fatal(err)
		}
		out := logs.String()
		if got := strings.Contains(out, "in the clear"); got != c.warn {
			t.Errorf("%s, key %q: warned %t, want %t:\n%s", c.url, c.key, got, c.warn, out)
		}
		if strings.Contains(out, "sk-plain") {
			t.Errorf("the key is in the log: %s", out)
		}
	}
}

// bodyClient is a client (answers of up to 1 MiB) of a server that
// answers every request with body, as JSON.
func bodyClient(t *testing.T, body string) *llm.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	m, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "m1", MaxResponseBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A base URL may carry a credential of its own, a password (a proxy's
// basic authentication in front of the server) or a query: the Config's
// String and LogValue, and the warning of a key sent over plain http,
// show neither. Before, both showed the base URL whole.
func TestConfigShowsNoURLCredential(t *testing.T) {
	const url = "http://user:url-password@models.example:8000/v1?token=url-query-token"
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	cfg := llm.Config{BaseURL: url, Model: "m1", APIKey: "sk-plain", Logger: log}
	if _, err := llm.New(cfg); err != nil {
		t.Fatal(err)
	}
	log.Info("config", "cfg", cfg)
	s := fmt.Sprint(cfg) + fmt.Sprintf("%+v", cfg) + logs.String()
	for _, secret := range []string{"url-password", "url-query-token", "sk-plain"} {
		if strings.Contains(s, secret) {
			t.Errorf("%s shows in %s", secret, s)
		}
	}
	if !strings.Contains(s, "models.example:8000/v1") {
		t.Errorf("the base URL's host and path are not shown: %s", s)
	}
}
