// Package nettest holds helpers for tests that attack a server over real
// sockets:
//
//	conns := dialMany(t, addr, 2000)       // the test's own dialing
//	if n := nettest.HeldOpen(conns, 512); n > 512 {
//		t.Errorf("the server holds %d idle connections", n)
//	}
//
// and for tests that weigh what a server holds per connection:
//
//	before := nettest.Measure()
//	c, err := nettest.DialWebSocket(addr, "/") // no buffers, no goroutine
//	…
//	t.Log(nettest.Per(before, nettest.Measure(), n))
package nettest
