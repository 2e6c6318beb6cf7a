// Package relaytest runs embedded relays on loopback for the tests of
// the packages above the relay (the pool's own external tests, the SNAP
// inbox, the client, the delegate, the command), so that each does not
// write its own listener, server goroutine and clean-up.
//
//	url := relaytest.Serve(t, embedded.Config{})              // in memory, closed when t ends
//	b := relaytest.Serve(t, embedded.Config{MaxLimit: 3})     // a relay capping its stored results
//	cut := &relaytest.Cuttable{URL: b}
//	pool := relay.NewPool(relay.PoolConfig{URLs: []string{url, b}, Dial: cut.Dial})
//	cut.Cut()     // the pool's connection to b drops, and b cannot be dialed
//	cut.Restore() // b can be dialed again
//
// It is for tests only: nothing outside _test.go files imports it.
package relaytest
