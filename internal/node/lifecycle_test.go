package node

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestLifecycleClosesInReverseOrder(t *testing.T) {
	var l lifecycle
	var closed []string
	for _, name := range []string{"relay", "pool", "database", "inbox"} {
		l.push(name, func() error { closed = append(closed, name); return nil })
	}
	if err := l.closeAll(); err != nil {
		t.Fatalf("closeAll: %v", err)
	}
	if want := []string{"inbox", "database", "pool", "relay"}; !slices.Equal(closed, want) {
		t.Fatalf("closed %v, want %v", closed, want)
	}
	if err := l.closeAll(); err != nil || len(closed) != 4 {
		t.Fatalf("a second closeAll closed again (%v) or failed (%v)", closed, err)
	}
}

func TestLifecycleJoinsErrorsAndClosesEverything(t *testing.T) {
	errPool, errRelay := errors.New("pool broke"), errors.New("relay broke")
	var l lifecycle
	var closed []string
	l.push("relay", func() error { closed = append(closed, "relay"); return errRelay })
	l.push("pool", func() error { closed = append(closed, "pool"); return errPool })
	l.push("inbox", func() error { closed = append(closed, "inbox"); return nil })
	err := l.closeAll()
	if !errors.Is(err, errPool) || !errors.Is(err, errRelay) {
		t.Fatalf("closeAll = %v, want both closers' errors", err)
	}
	if !strings.Contains(err.Error(), "stop pool: pool broke") || !strings.Contains(err.Error(), "stop relay: relay broke") {
		t.Fatalf("closeAll = %q, want each error to name its part", err)
	}
	if want := []string{"inbox", "pool", "relay"}; !slices.Equal(closed, want) {
		t.Fatalf("closed %v, want %v: a failing closer must not stop the others", closed, want)
	}
}

func TestLifecycleFailingStartClosesWhatStarted(t *testing.T) {
	errDB := errors.New("database unreachable")
	var l lifecycle
	var events []string
	part := func(name string) func(context.Context) error {
		return func(context.Context) error {
			events = append(events, "start "+name)
			l.push(name, func() error { events = append(events, "stop "+name); return nil })
			return nil
		}
	}
	err := l.start(context.Background(),
		part("relay"),
		part("pool"),
		func(context.Context) error { events = append(events, "start database"); return errDB },
		part("inbox"),
	)
	if !errors.Is(err, errDB) {
		t.Fatalf("start = %v, want the failing step's error", err)
	}
	want := []string{"start relay", "start pool", "start database", "stop pool", "stop relay"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v: the parts started before the failure stop, newest first, and none after it starts", events, want)
	}
	if len(l.parts) != 0 {
		t.Fatalf("%d parts left on the stack after a failed start", len(l.parts))
	}
}
