package llm_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
)

// maxErrorText bounds the text of an error the client returns, as the
// tests below hold it to.
const maxErrorText = 1000

// The words of a server that the client's errors quote (a member name
// it refused, the JSON path of a syntax error, a status line that is no
// HTTP) are bounded, and its API key, which a server may echo there as
// anywhere, is redacted: the runtime logs the error of each failed call
// in full, and the node logs Check's. Before, a duplicate member name of
// 400 KB made an error of 400 KB, with the key in it when the name held
// it.
func TestServerWordsInErrorsBounded(t *testing.T) {
	const key = "sk-echoed-secret"
	long := strings.Repeat("k", 400<<10)
	for _, c := range []struct{ name, body string }{
		{"duplicate name", `{"` + key + long + `":1,"` + key + long + `":2}`},
		{"duplicate name, case", `{"` + key + long + `":1,"` + strings.ToUpper(key+long) + `":2}`},
		{"syntax error under a long name", `{"` + key + long + `":[1,}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, c.body)
			}))
			defer srv.Close()
			m, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "m1", APIKey: key})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Complete(t.Context(), prompt("x"))
			var ae *agent.AnsweredError
			if !errors.Is(err, llm.ErrMalformedResponse) || !errors.As(err, &ae) {
				t.Fatalf("Complete: err = %.200v; want an AnsweredError of ErrMalformedResponse", err)
			}
			checkErrorText(t, "Complete", err, key)
			err = m.Check(t.Context())
			if !errors.Is(err, llm.ErrMalformedResponse) {
				t.Fatalf("Check: err = %.200v; want ErrMalformedResponse", err)
			}
			checkErrorText(t, "Check", err, key)
		})
	}

	// A server that answers with no HTTP at all: Go's transport quotes
	// the line it read.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				io.WriteString(conn, "Bearer "+key+" "+strings.Repeat("x", 30<<10)+"\r\n\r\n")
			}()
		}
	}()
	m, err := llm.New(llm.Config{BaseURL: "http://" + ln.Addr().String() + "/v1", Model: "m1", APIKey: key})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Complete(t.Context(), prompt("x"))
	if err == nil {
		t.Fatal("Complete: no error from a server that speaks no HTTP")
	}
	checkErrorText(t, "Complete, no HTTP", err, key)
	err = m.Check(t.Context())
	if err == nil {
		t.Fatal("Check: no error from a server that speaks no HTTP")
	}
	checkErrorText(t, "Check, no HTTP", err, key)
}

func checkErrorText(t *testing.T, what string, err error, key string) {
	t.Helper()
	s := err.Error()
	if len(s) > maxErrorText {
		t.Errorf("%s: the error is %d bytes: %.200s…", what, len(s), s)
	}
	if strings.Contains(s, key) {
		t.Errorf("%s: the error holds the API key: %.200s…", what, s)
	}
}
