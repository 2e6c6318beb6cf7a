package snaphttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// FuzzPost: any body posted to /snap, as JSON or as SSE, gets 200 with
// signed messages of the server, 202 with nothing, or 400 or 413 (over
// MaxBody) with a JSON error; never a 5xx.
func FuzzPost(f *testing.F) {
	at := time.Unix(1_800_000_000, 0)
	for _, b := range [][]byte{
		raw(f, requestFrom(f, clientKey, addr(serverKey), "message/send", sendPayload, at)),
		raw(f, requestFrom(f, clientKey, addr(serverKey), "message/stream", `{"steps":2}`, at)),
		[]byte(`{"type":"event"}`), []byte(`[]`), []byte(`"x"`), []byte(`{`), {},
	} {
		f.Add(b, false)
		f.Add(b, true)
	}
	srv, err := snaphttp.New(snaphttp.Config{Handler: newSNAPServer(f, nil), Rate: rate.Inf, MaxBody: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, sse bool) {
		req := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "http://127.0.0.1/snap", bytes.NewReader(body))
		if sse {
			req.Header.Set("Accept", "text/event-stream")
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, req)
		out := w.Body.Bytes()
		switch w.Code {
		case http.StatusOK:
			msgs := [][]byte{out}
			if sse {
				msgs = nil
				for _, f := range bytes.SplitAfter(out, []byte("\n\n")) {
					if len(f) == 0 {
						continue
					}
					if !bytes.HasPrefix(f, []byte("data: ")) || !bytes.HasSuffix(f, []byte("\n\n")) {
						t.Fatalf("bad frame %q", f)
					}
					msgs = append(msgs, f[6:len(f)-2])
				}
			}
			for _, m := range msgs {
				v, err := snap.NewValidator(snap.Config{MaxDrift: 1 << 62}).Validate(context.Background(), m)
				if err != nil || !v.Signed || v.From != addr(serverKey) {
					t.Fatalf("answer %s: %v", m, err)
				}
			}
		case http.StatusAccepted:
			if len(out) != 0 {
				t.Fatalf("202 with a body %q", out)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if !json.Valid(out) {
				t.Fatalf("%d body %q", w.Code, out)
			}
		default:
			t.Fatalf("status %d for %q: %s", w.Code, body, out)
		}
	})
}
