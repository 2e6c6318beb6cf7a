// Package storetest is the conformance suite of tasks.Store. Every store
// runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) tasks.Store { return newTestStore(t) })
//	}
//
// newStore must return an empty store with room for at least 300 tasks.
package storetest
