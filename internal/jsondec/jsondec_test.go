package jsondec

import (
	"errors"
	"io"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// walk reads every token of b and returns the first error.
func walk(b []byte, opts ...jsontext.Options) error {
	d := Get(b, opts...)
	defer Put(d)
	for {
		if _, err := d.ReadToken(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// A reused decoder checks as a fresh one does: names an object before it
// held are no duplicates in the next, a repeated name is refused in every
// use, and the options of one use do not carry into the next.
func TestReuseKeepsTheChecks(t *testing.T) {
	for range 3 {
		if err := walk([]byte(`{"a":{"b":1,"c":[{"b":2}]},"d":{"a":1,"b":2}}`)); err != nil {
			t.Fatalf("distinct names refused: %v", err)
		}
		if err := walk([]byte(`{"x":{"b":1,"b":2}}`)); !errors.Is(err, jsontext.ErrDuplicateName) {
			t.Fatalf("repeated name: got %v, want %v", err, jsontext.ErrDuplicateName)
		}
		if err := walk([]byte(`{"b":1,"b":2}`), jsontext.AllowDuplicateNames(true)); err != nil {
			t.Fatalf("repeated name with AllowDuplicateNames: %v", err)
		}
		if err := walk([]byte("{\"a\":\"\xff\"}")); err == nil {
			t.Fatal("invalid UTF-8 accepted")
		}
	}
}

// A decoder given back no longer holds its input.
func TestPutLetsGoOfTheInput(t *testing.T) {
	in := []byte(`{"a":1}`)
	d := Get(in)
	if _, err := d.ReadToken(); err != nil {
		t.Fatal(err)
	}
	Put(d)
	if d.in.Len() != 0 || d.UnreadBuffer() != nil {
		t.Fatalf("a decoder in the pool still holds %q", d.UnreadBuffer())
	}
}
