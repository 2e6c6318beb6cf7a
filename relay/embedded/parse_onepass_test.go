package embedded

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// sameAsTwoPass fails t unless the one-pass parser answers b exactly as
// the two-pass one did: the same message, or the same refusal.
func sameAsTwoPass(t *testing.T, b []byte, lim *limits) {
	t.Helper()
	got, gerr := parseClientMessage(b, lim)
	want, werr := twoPassParseClientMessage(b, lim)
	if gerr != nil || werr != nil {
		if !reflect.DeepEqual(gerr, werr) {
			t.Fatalf("%.200q:\none pass: %#v\ntwo passes: %#v", b, gerr, werr)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%.200q:\none pass: %+v\ntwo passes: %+v", b, got, want)
	}
}

// onePassCases are messages of every kind, valid and refused for every
// reason, and valid JSON around invalid at each place.
func onePassCases(t testing.TB) []string {
	id := strings.Repeat("ab", 32)
	sig := strings.Repeat("cd", 64)
	event := `{"id":"` + id + `","pubkey":"` + id + `","created_at":1,"kind":1,"tags":[["p","x"]],"content":"hi","sig":"` + sig + `"}`
	cases := []string{
		`["EVENT",` + event + `]`,
		`["EVENT",` + event + `,1]`,
		`["EVENT",` + event + `,{"a":1,"a":2}]`,
		`["EVENT",` + event + `] x`,
		`["EVENT",` + event,
		`["EVENT",{"id":"` + id + `","kind":"x","tags":[["p","x"]],"content":"hi"}]`,
		`["EVENT",{"id":"` + id + `","kind":"x","tags":[["p",1]],"content":"hi"},{"a":01}]`,
		`["EVENT",{"id":"` + id + `","tags":[["p",null]],"content":"\ud800"}]`,
		`["EVENT",{"id":"` + id + `","tags":[["p","x"]],"tags":[]}]`,
		`["EVENT",{"id":1}]`, `["EVENT",{"id":null}]`, `["EVENT",[]]`, `["EVENT",5]`, `["EVENT"]`,
		`["EVENT",{"id":"x","created_at":1.5,"kind":1e10}]`,
		`["REQ","sub",{"kinds":[21339,4339],"#p":["` + id + `"],"since":1700000000}]`,
		`["REQ","s",{"#skill":["echo"],"limit":5},{"ids":[],"authors":null}]`,
		`["REQ","s",{"search":"x"}]`, `["REQ","s",{"search":"x"},{"a":tru}]`,
		`["REQ","s",{"x":1},{"kinds":[1]}]`, `["REQ","s",{"kinds":[1,"a"]},{"kinds":[1],"kinds":[2]}]`,
		`["REQ","s",{"kinds":[[1]]},{}]`, `["REQ","s",{"limit":-1}]`, `["REQ","s",{"limit":{"a":[1]}},{}]`,
		`["REQ","s",{},{},{}]`, `["REQ","s",{},{},{},{}]`, `["REQ","s",{"x":1},{},{},{}]`, `["REQ","s",{},{},{},{},{"a":1,"a":2}]`,
		`["REQ","s",5,{}]`, `["REQ","s",[1,[2]],{}]`, `["REQ","s",null]`, `["REQ","s"]`, `["REQ","s",]`,
		`["REQ",5,{}]`, `["REQ"]`, `["REQ","",{}]`, `["REQ","` + strings.Repeat("é", 17) + `",{}]`,
		`["REQ","n",{"kinds":[1e3,1000.0],"since":17e8,"until":1.7E+9,"limit":10000e-1}]`,
		`["REQ","n",{"limit":1.5}]`, `["REQ","n",{"since":-1e19,"until":1e-999}]`,
		`["REQ","s",{"#e":["a"],"#e":["b"]}]`, `["REQ","s",{"kinds":[1]} ,  {"#t":["x"]} ]`,
		`["CLOSE","sub"]`, `["CLOSE","sub",1]`, `["CLOSE",""]`, `["CLOSE"]`, `["CLOSE","` + strings.Repeat("😀", 17) + `"]`,
		`["COUNT","c",{}]`, `["COUNT",1]`, `["COUNT","c",{]`,
		`["AUTH",{}]`, `["AUTH",{]`, `[1]`, `[1,{"a":1,"a":1}]`, `[]`, `[] []`, `{}`, `null`, `"EVENT"`, ``, `[`, `["EV`,
		` [ "CLOSE" , "s" ] `, "[\"CLOSE\",\"\xff\"]", `["CLOSE","\u0000"]`,
	}
	// A valid EVENT as a peer sends it.
	k := newKey(t)
	ev := k.event(t, 21339, 1700000000, strings.Repeat("QUJD", 200), nostr.Tag{"p", strings.Repeat("ab", 32)})
	msg, err := json.Marshal([]any{"EVENT", ev})
	if err != nil {
		t.Fatal(err)
	}
	cases = append(cases, string(msg), string(msg[:len(msg)-1])+`,{"x":1,"x":2}]`)
	return cases
}

// TestOnePassSameAsTwoPass: reading a client message in one pass answers
// every message as the two passes did, each prefix of each message too.
func TestOnePassSameAsTwoPass(t *testing.T) {
	lim := fuzzLimits()
	for _, c := range onePassCases(t) {
		for i := range len(c) + 1 {
			sameAsTwoPass(t, []byte(c[:i]), lim)
		}
	}
}

func FuzzOnePassSameAsTwoPass(f *testing.F) {
	for _, c := range onePassCases(f) {
		f.Add([]byte(c))
	}
	lim := fuzzLimits()
	f.Fuzz(func(t *testing.T, b []byte) { sameAsTwoPass(t, b, lim) })
}

// BenchmarkParseOnePass parses the REQ and the EVENT of a SNAP request
// both ways, alternately in the same loop, and reports each one's time and
// their ratio:
//
//	go test ./relay/embedded -run '^$' -bench ParseOnePass -count 5
func BenchmarkParseOnePass(b *testing.B) {
	k := newKey(b)
	ev := k.event(b, 21339, 1700000000, strings.Repeat("QUJD", 200), nostr.Tag{"p", strings.Repeat("ab", 32)})
	event, err := json.Marshal([]any{"EVENT", ev})
	if err != nil {
		b.Fatal(err)
	}
	req := []byte(`["REQ","sub-1",{"kinds":[21339,4339],"since":1700000000,"#p":["` + strings.Repeat("ab", 32) + `"],"#e":["` + strings.Repeat("cd", 32) + `"]}]`)
	lim := fuzzLimits()
	for _, c := range []struct {
		name string
		msg  []byte
	}{{"REQ", req}, {"EVENT", event}} {
		b.Run(c.name, func(b *testing.B) {
			var old, cur time.Duration
			for b.Loop() {
				t0 := time.Now()
				if _, err := twoPassParseClientMessage(c.msg, lim); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if _, err := parseClientMessage(c.msg, lim); err != nil {
					b.Fatal(err)
				}
				cur += time.Since(t1)
				old += t1.Sub(t0)
			}
			b.ReportMetric(float64(old.Nanoseconds())/float64(b.N), "two-pass-ns/op")
			b.ReportMetric(float64(cur.Nanoseconds())/float64(b.N), "one-pass-ns/op")
			b.ReportMetric(float64(cur)/float64(old), "one/two")
		})
	}
}
