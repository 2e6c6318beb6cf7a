package bounded_test

import (
	"sync"
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
