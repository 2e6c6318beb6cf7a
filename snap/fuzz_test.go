package snap_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/snap"
)

// FuzzValidate feeds arbitrary bytes to the whole validation. It must never
// panic, must fail only with a typed *snap.Error, and what it accepts must
// survive a round trip: serialized again, it validates to the same message.
func FuzzValidate(f *testing.F) {
	f.Add(signed(f, "seed-1", t0))
	f.Add([]byte(`{"id":"a","version":"0.1","from":"x","type":"request","method":"a/b","payload":{},"timestamp":1}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`{"payload":{"x":"\ud800"}}`))
	f.Add([]byte(`[1e400]`))
	f.Add([]byte(`{"timestamp":1.7701632e9}`))
	f.Add([]byte("\xff"))
	unsigned := strings.Replace(string(signed(f, "seed-2", t0)), `"type":"request"`, `"type":"event"`, 1)
	f.Add([]byte(unsigned[:strings.LastIndex(unsigned, `,"sig"`)] + "}"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		v := snap.NewValidator(snap.Config{Now: at(t0), Replay: snap.NewMemoryReplayStore(16)})
		got, err := v.Validate(context.Background(), raw)
		if err != nil {
			var se *snap.Error
			if !errors.As(err, &se) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			if se.Code < 1000 || se.Code > 5999 || se.Message == "" {
				t.Fatalf("malformed error %+v", se)
			}
			return
		}
		out, err := got.MarshalJSON()
		if err != nil {
			t.Fatalf("accepted message does not serialize: %v", err)
		}
		again, err := snap.NewValidator(snap.Config{Now: at(t0)}).Validate(context.Background(), out)
		if err != nil {
			t.Fatalf("re-serialized message rejected: %v\n%s", err, out)
		}
		if !bytes.Equal(again.Payload, got.Payload) || again.ID != got.ID || again.Sig != got.Sig || again.Signed != got.Signed {
			t.Fatalf("round trip changed the message:\n%s\n%s", out, raw)
		}
	})
}

// FuzzCanonicalize checks that canonicalization never panics, produces JSON
// with the same meaning, and is idempotent.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"b":1e21,"a":12345678901234567890,"c":0.1,"d":-0,"e":1.0}`,
		`{"\uffff":1,"\ud83d\ude00":2,"a":[true,false,null]}`, `"\u00e9\u2028\u001f"`,
		`[1,[2,[3,{"x":"y"}]]]`, `{"a":1,"a":2}`, `1e400`, `5e-324`, ` {"x" : [ 1 , {"b":2,"a":1} ] } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := snap.Canonicalize(raw)
		if err != nil {
			if !errors.Is(err, snap.ErrNotIJSON) {
				t.Fatalf("error does not wrap ErrNotIJSON: %v", err)
			}
			return
		}
		c2, err := snap.Canonicalize(c)
		if err != nil {
			t.Fatalf("canonical form rejected: %v\n%q", err, c)
		}
		if !bytes.Equal(c, c2) {
			t.Fatalf("not idempotent:\n%q\n%q", c, c2)
		}
		var a, b any
		if json.Unmarshal(raw, &a) != nil || json.Unmarshal(c, &b) != nil {
			t.Fatalf("canonical form is not JSON: %q", c)
		}
		// DeepEqual compares numbers as doubles, so -0 equals 0 as JCS says.
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("meaning changed:\n%q\n%q", raw, c)
		}
	})
}
