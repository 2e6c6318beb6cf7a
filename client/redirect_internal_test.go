package client

import (
	"net/http"
	"testing"
)

// The one redirect followed is a host's move from http to https on its
// port: the same, or the default of each scheme; another port, host or
// scheme is not.
func TestFollowRedirectKeepsHostAndPort(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		ok       bool
	}{
		{"http://agent.example/snap", "https://agent.example/snap", true},
		{"http://agent.example:80/snap", "https://agent.example:443/snap", true},
		{"http://agent.example:8080/snap", "https://agent.example:8080/snap", true},
		{"http://agent.example:8080/snap", "https://agent.example/snap", false},
		{"http://agent.example/snap", "https://agent.example:8443/snap", false},
		{"http://agent.example/snap", "https://other.example/snap", false},
		{"https://agent.example/snap", "http://agent.example/snap", false},
	} {
		first, _ := http.NewRequest(http.MethodPost, tc.from, nil)
		next, _ := http.NewRequest(http.MethodPost, tc.to, nil)
		if err := followRedirect(next, []*http.Request{first}); (err == nil) != tc.ok {
			t.Errorf("%s to %s: %v; want followed %v", tc.from, tc.to, err, tc.ok)
		}
	}
}
