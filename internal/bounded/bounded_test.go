package bounded_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/snapnode/snapnode/internal/bounded"
)

func TestCacheBounded(t *testing.T) {
	c := bounded.NewCache[int, int](100)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 10_000 {
				c.Put(g*10_000+i, i)
				if c.Len() > 100 {
					t.Errorf("cache holds %d entries, bound 100", c.Len())
					return
				}
			}
		})
	}
	wg.Wait()
	c.Put(-1, 7)
	if v, ok := c.Get(-1); !ok || v != 7 {
		t.Errorf("Get after Put = %v %v", v, ok)
	}
	c.Put(-1, 8) // an update never evicts
	if v, _ := c.Get(-1); v != 8 || c.Len() != 100 {
		t.Errorf("update: %v, len %d", v, c.Len())
	}
	z := bounded.NewCache[int, int](0) // a bound below 1 means 1
	z.Put(1, 1)
	z.Put(2, 2)
	if z.Len() != 1 {
		t.Errorf("zero-bound cache holds %d", z.Len())
	}
}

// Add stores a key once: of many goroutines adding one key, exactly one
// is told it added it.
func TestCacheAddOnce(t *testing.T) {
	c := bounded.NewCache[int, struct{}](16)
	var added atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if c.Add(7, struct{}{}) {
				added.Add(1)
			}
		})
	}
	wg.Wait()
	if added.Load() != 1 || c.Len() != 1 {
		t.Fatalf("%d adds succeeded, %d entries; want 1 and 1", added.Load(), c.Len())
	}
}
