package secp

import "testing"

// A key used after the tick a promotion read (a concurrent verification
// through its table stored a later tick) is not idle: now − last must not
// wrap around to a huge idleness.
func TestTablesUsedAfterNowIsNotIdle(t *testing.T) {
	tables := NewTables[int](1)
	h := &held{}
	h.last.Store(101)
	tables.m[0] = h
	if k, idle := tables.idlest(100); idle {
		t.Fatalf("key %d, used at tick 101, is idle at tick 100", k)
	}
	if _, idle := tables.idlest(101 + IdleVerifications(1)); idle {
		t.Fatal("idle after exactly IdleVerifications, want more")
	}
	if _, idle := tables.idlest(102 + IdleVerifications(1)); !idle {
		t.Fatal("not idle after more than IdleVerifications")
	}
}
