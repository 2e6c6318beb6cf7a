package client

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// serveDNS answers each query read from conn, DNS over a stream (each
// message after its length in two bytes), with an A record of each IPv4
// address of addrs, and with no record a query of another type.
func serveDNS(conn net.Conn, addrs []netip.Addr) {
	defer conn.Close()
	for {
		var n [2]byte
		if _, err := io.ReadFull(conn, n[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(n[:]))
		if _, err := io.ReadFull(conn, q); err != nil {
			return
		}
		// The question follows the 12 bytes of the header: a name, its
		// type and its class.
		end := 12
		for end < len(q) && q[end] != 0 {
			end += int(q[end]) + 1
		}
		if end += 5; end > len(q) {
			return
		}
		var answers []byte
		count := 0
		for _, a := range addrs {
			if binary.BigEndian.Uint16(q[end-4:]) == 1 && a.Is4() {
				ip := a.As4()
				// The name by a pointer to the question's, A, IN, 60 s.
				answers = append(answers, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
				answers = append(answers, ip[:]...)
				count++
			}
		}
		// The query's id; a response, recursion desired and available.
		resp := append([]byte{q[0], q[1], 0x81, 0x80, 0, 1, 0, byte(count), 0, 0, 0, 0}, q[12:end]...)
		resp = append(resp, answers...)
		binary.BigEndian.PutUint16(n[:], uint16(len(resp)))
		if _, err := conn.Write(append(n[:], resp...)); err != nil {
			return
		}
	}
}

// resolverOf is a resolver that finds every name at addrs, in their order.
func resolverOf(addrs ...netip.Addr) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		c, s := net.Pipe()
		go serveDNS(s, addrs)
		return c, nil
	}}
}

// A name that resolves to an address the client refuses and to one it
// connects to: when the connection fails, the error is that failure, one
// that may pass (tried again, and setting the endpoint aside), and names
// the refused address besides; not the refusal alone, which would not be
// tried again. An address it connects to that answers is used; a name
// with only refused addresses is refused.
func TestRefusedAndFailedAddressesBothNamed(t *testing.T) {
	refused, allowed := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")
	var (
		mu   sync.Mutex
		told []netip.AddrPort
	)
	cfg := func(addrs ...netip.Addr) NetConfig {
		return NetConfig{RefusePrivate: true, Resolver: resolverOf(addrs...),
			OnRefused: func(a netip.AddrPort) { mu.Lock(); told = append(told, a); mu.Unlock() },
			class: func(a netip.Addr) string {
				if a.Unmap() == refused {
					return "private"
				}
				return ""
			}}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	hc, ws := newNet(cfg(refused, allowed))
	for name, dial := range map[string]func() error{
		"POST": func() error {
			resp, err := hc.Post(fmt.Sprintf("http://agent.test:%d/snap", closed), "application/json", strings.NewReader("{}"))
			if err == nil {
				resp.Body.Close()
			}
			return err
		},
		"WebSocket": func() error {
			c, resp, err := ws.DialContext(t.Context(), fmt.Sprintf("ws://agent.test:%d/snap", closed), nil)
			if err == nil {
				c.Close()
			}
			if resp != nil {
				resp.Body.Close()
			}
			return err
		},
	} {
		err := dial()
		if errors.Is(err, ErrPrivateAddress) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("%s: %v; want the refused connection to %s, not a refusal of the client's", name, err, allowed)
		}
		if err != nil && (!strings.Contains(err.Error(), fmt.Sprint(refused, ":", closed)) || !strings.Contains(err.Error(), fmt.Sprint(allowed, ":", closed))) {
			t.Errorf("%s: %v; want both addresses named", name, err)
		}
		if retry, _ := retryable(err); !retry || !down(err) {
			t.Errorf("%s: %v: retryable %v, down %v; want a failure that may pass", name, err, retry, down(err))
		}
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	resp, err := hc.Get(fmt.Sprintf("http://agent.test:%d/", port))
	if err != nil {
		t.Fatalf("GET with an address it connects to: %v", err)
	}
	resp.Body.Close()
	mu.Lock()
	if len(told) == 0 || told[len(told)-1] != netip.AddrPortFrom(refused, uint16(port)) {
		t.Errorf("OnRefused told %v; want %s", told, netip.AddrPortFrom(refused, uint16(port)))
	}
	mu.Unlock()

	hc, _ = newNet(cfg(refused))
	_, err = hc.Get(fmt.Sprintf("http://agent.test:%d/", port))
	if !errors.Is(err, ErrPrivateAddress) || !strings.Contains(err.Error(), "127.0.0.2") {
		t.Errorf("only a refused address: %v; want ErrPrivateAddress naming it", err)
	}
}
