package snaphttp_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// The cost HTTP adds to answering message/send: a POST round trip over a
// keep-alive loopback connection (BenchmarkPostSend) beside the same
// snap.Server answering the same request in-process (BenchmarkRespond, the
// baseline). Requests are signed before the timer starts.
func BenchmarkRespond(b *testing.B) {
	s := newSNAPServer(b, nil)
	reqs := signedRequests(b, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if resp := s.Respond(context.Background(), snap.Inbound{Raw: reqs[i]}); resp == nil || errCode(resp.Payload) != 0 {
			b.Fatal(resp)
		}
	}
}

func BenchmarkPostSend(b *testing.B) {
	e := start(b, nil, func(c *snaphttp.Config) { c.Rate = rate.Inf })
	reqs := signedRequests(b, b.N)
	client := &http.Client{}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		resp, err := client.Post(e.base+"/snap", "application/json", strings.NewReader(string(reqs[i])))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n == 0 {
			b.Fatal(resp.Status)
		}
	}
}

func signedRequests(b *testing.B, n int) [][]byte {
	b.Helper()
	out := make([][]byte, n)
	for i := range out {
		out[i] = raw(b, request(b, "message/send", sendPayload))
	}
	return out
}
