package bounded

import "sync"

// Cache is a bounded map safe for concurrent use.
type Cache[K comparable, V any] struct {
	mu  sync.Mutex
	max int
	m   map[K]V
}

// NewCache returns a Cache of at most max entries (at least 1).
func NewCache[K comparable, V any](size int) *Cache[K, V] {
	size = max(size, 1)
	return &Cache[K, V]{max: size, m: make(map[K]V, min(size, 1024))}
}

// Get returns the value of k.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

// Put stores v under k, evicting an arbitrary entry if the cache is full.
func (c *Cache[K, V]) Put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.put(k, v)
}

// Add stores v under k and reports true unless k is there already (then
// it changes nothing): a check and a store no other call comes between.
func (c *Cache[K, V]) Add(k K, v V) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		return false
	}
	c.put(k, v)
	return true
}

func (c *Cache[K, V]) put(k K, v V) {
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for victim := range c.m {
			delete(c.m, victim)
			break
		}
	}
	c.m[k] = v
}

// Len returns the number of entries.
func (c *Cache[K, V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
