// Package bounded provides a map of bounded size for caches that must not
// grow under a flood: when full, putting a new key evicts an arbitrary
// entry, so a flood of new keys costs what no cache would and no more
// memory.
//
//	c := bounded.NewCache[string, *Key](4096)
//	if k, ok := c.Get(addr); ok { … }
//	c.Put(addr, k)
package bounded
