package peercap_test

import (
	"fmt"

	"github.com/snapnode/snapnode/internal/peercap"
)

// Two addresses of one IPv6 /64 are one peer.
func ExampleCounter() {
	conns := peercap.New(1, 10, nil)
	fmt.Println(conns.Acquire(peercap.Key("[2001:db8::1]:5000")))
	fmt.Println(conns.Acquire(peercap.Key("[2001:db8::2]:5001")))
	// Output:
	// 0
	// 429
}
