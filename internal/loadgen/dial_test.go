package loadgen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/snapnode/snapnode/identity"
)

// TestDialSpreadsHTTP checks that the HTTP peers take the node's
// endpoints in turn (one per replica): two servers, four peers, each
// server gets two peers' requests.
func TestDialSpreadsHTTP(t *testing.T) {
	var hits [2]atomic.Int64
	var urls []string
	for i := range hits {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			http.Error(w, "not a node", http.StatusTeapot)
		}))
		t.Cleanup(s.Close)
		urls = append(urls, s.URL+"/snap")
	}
	keys, err := Keys(4, "dial")
	if err != nil {
		t.Fatal(err)
	}
	node, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	peers, closeAll, err := Dial(context.Background(), Target{To: node.Address(identity.Mainnet), HTTP: urls, Via: []string{ViaHTTP}}, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	for i, p := range peers {
		_, err := p.Agent.Send(context.Background(), "tasks/get", []byte(`{"taskId":"x"}`))
		if kind := ErrorKind(err); kind != "http 418" {
			t.Fatalf("peer %d: %v (%s), want the server's 418", i, err, kind)
		}
	}
	if hits[0].Load() != 2 || hits[1].Load() != 2 {
		t.Errorf("the endpoints got %d and %d requests, want 2 each", hits[0].Load(), hits[1].Load())
	}
}
