package embedded

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// fuzzLimits are small, so that the fuzzer reaches every limit.
func fuzzLimits() *limits {
	return &limits{
		maxMessageLength: 16 << 10,
		maxSubscriptions: 4,
		maxFilters:       3,
		maxFilterValues:  20,
		maxLimit:         50,
		defaultLimit:     10,
		maxSubIDLength:   16,
		maxEventTags:     10,
		maxContentLength: 1024,
	}
}

var replyPrefixes = []string{"invalid: ", "unsupported: ", "error: "}

func FuzzParseClientMessage(f *testing.F) {
	id := strings.Repeat("ab", 32)
	sig := strings.Repeat("cd", 64)
	for _, s := range []string{
		`["EVENT",{"id":"` + id + `","pubkey":"` + id + `","created_at":1,"kind":1,"tags":[["p","x"]],"content":"hi","sig":"` + sig + `"}]`,
		`["EVENT",{"id":"` + id + `","pubkey":"` + id + `","created_at":1.5,"kind":1,"tags":[],"content":"","sig":"` + sig + `"}]`,
		`["EVENT",{"id":null}]`,
		`["REQ","sub",{"kinds":[21339,4339],"#p":["` + id + `"],"since":1700000000}]`,
		`["REQ","s",{"#skill":["echo"],"limit":5},{"ids":[],"authors":null}]`,
		`["REQ","s",{"search":"x"}]`,
		`["CLOSE","sub"]`,
		`["REQ","` + strings.Repeat("é", 16) + `",{}]`,
		`["CLOSE","` + strings.Repeat("😀", 17) + `"]`,
		`["COUNT","c",{}]`,
		`["REQ","",{}]`,
		`["REQ","n",{"kinds":[1e3,1000.0],"since":17e8,"until":1.7E+9,"limit":10000e-1}]`,
		`["REQ","n",{"limit":1.5}]`,
		`["REQ","n",{"since":-1e19,"until":1e-999}]`,
		`["CLOSE",""]`,
		`["AUTH",{}]`,
		`[]`, `{}`, `null`, `"EVENT"`, `[1]`, ``,
	} {
		f.Add([]byte(s))
	}
	lim := fuzzLimits()
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseClientMessage(b, lim)
		if err != nil {
			var r *refusal
			if !errors.As(err, &r) {
				t.Fatalf("error %v is not a refusal", err)
			}
			ok := false
			for _, p := range replyPrefixes {
				ok = ok || strings.HasPrefix(r.msg, p)
			}
			if !ok {
				t.Fatalf("reply %q has no machine-readable prefix", r.msg)
			}
			if r.reply == replyClosed && r.ref == "" && r.msg != "invalid: subscription id must not be empty" {
				t.Fatalf("CLOSED without a subscription id: %q", r.msg)
			}
			return
		}
		if len(b) > lim.maxMessageLength {
			t.Fatalf("accepted a message of %d bytes", len(b))
		}
		switch m.typ {
		case msgEvent:
			if m.event == nil {
				t.Fatal("EVENT without event")
			}
			if err := checkShape(m.event, lim); err != nil {
				t.Fatalf("accepted event fails checkShape: %v", err)
			}
		case msgReq:
			if m.subID == "" || utf8.RuneCountInString(m.subID) > lim.maxSubIDLength {
				t.Fatalf("subscription id %q accepted", m.subID)
			}
			if len(m.filters) == 0 || len(m.filters) > lim.maxFilters {
				t.Fatalf("%d filters accepted", len(m.filters))
			}
			for _, f := range m.filters {
				if f.valueCount() > lim.maxFilterValues {
					t.Fatalf("filter with %d values accepted", f.valueCount())
				}
				if f.hasLimit && (f.limit < 0 || f.limit > lim.maxLimit) {
					t.Fatalf("limit %d accepted", f.limit)
				}
			}
		case msgClose:
			if m.subID == "" || utf8.RuneCountInString(m.subID) > lim.maxSubIDLength {
				t.Fatalf("subscription id %q accepted", m.subID)
			}
		default:
			t.Fatalf("unknown message type %d", m.typ)
		}
	})
}

func FuzzFilterMatch(f *testing.F) {
	id := strings.Repeat("ab", 32)
	pk := strings.Repeat("01", 32)
	sig := strings.Repeat("cd", 64)
	ev := `{"id":"` + id + `","pubkey":"` + pk + `","created_at":100,"kind":31337,"tags":[["d","bc1p"],["skill","echo","Echo"],["p","` + pk + `"],["e"]],"content":"","sig":"` + sig + `"}`
	for _, flt := range []string{
		`{}`,
		`{"ids":["` + id + `"]}`,
		`{"ids":[]}`,
		`{"authors":["` + pk + `"],"kinds":[31337]}`,
		`{"kinds":[1,31337],"since":100,"until":100}`,
		`{"since":101}`,
		`{"#skill":["echo"]}`,
		`{"#skill":["Echo"]}`,
		`{"#d":["bc1p"],"#p":["` + pk + `"]}`,
		`{"#e":[""]}`,
		`{"#p":null,"limit":0}`,
		`{"kinds":[31337e0],"since":1e2,"until":100.0,"limit":2.0}`,
		`{"kinds":[3133.7e1],"since":0.1e3}`,
	} {
		f.Add(flt, ev)
	}
	lim := fuzzLimits()
	f.Fuzz(func(t *testing.T, filterJSON, eventJSON string) {
		if len(filterJSON) > lim.maxMessageLength || len(eventJSON) > lim.maxMessageLength {
			return
		}
		flt, err := parseFilter(json.RawMessage(filterJSON), lim)
		if err != nil {
			return
		}
		ev, _, err := parseEvent(jsontext.Value(eventJSON), lim)
		if err != nil {
			return
		}
		tags := tagsOf(ev)
		got := flt.matches(ev, &tags)
		want, ok := refMatch(filterJSON, eventJSON)
		if !ok {
			t.Fatalf("reference could not read inputs the parser accepted:\n%s\n%s", filterJSON, eventJSON)
		}
		if got != want {
			t.Fatalf("matches = %v, reference = %v\nfilter %s\nevent %s", got, want, filterJSON, eventJSON)
		}
		if flt.matchesNothing() && got {
			t.Fatalf("matchesNothing filter matched\nfilter %s\nevent %s", filterJSON, eventJSON)
		}
	})
}

// refMatch is a straightforward NIP-01 matcher over generic JSON, written
// from the specification independently of filter.go: every present field
// must match (null counts as absent), a list matches when it contains the
// event's value, "#x" matches a tag ["x", value, …] with value in the
// list, since and until are inclusive, limit is ignored.
func refMatch(filterJSON, eventJSON string) (bool, bool) {
	var flt, ev map[string]any
	if !decodeNumbers(filterJSON, &flt) || !decodeNumbers(eventJSON, &ev) {
		return false, false
	}
	created, err := ev["created_at"].(json.Number).Int64()
	if err != nil {
		return false, false
	}
	kind, err := ev["kind"].(json.Number).Int64()
	if err != nil {
		return false, false
	}
	contains := func(list any, v string) bool {
		for _, x := range list.([]any) {
			if x.(string) == v {
				return true
			}
		}
		return false
	}
	for k, v := range flt {
		if v == nil {
			continue
		}
		switch {
		case k == "ids":
			if !contains(v, ev["id"].(string)) {
				return false, true
			}
		case k == "authors":
			if !contains(v, ev["pubkey"].(string)) {
				return false, true
			}
		case k == "kinds":
			found := false
			for _, x := range v.([]any) {
				n, ok := refInt(string(x.(json.Number)))
				found = found || (ok && n == kind)
			}
			if !found {
				return false, true
			}
		case k == "since":
			n, _ := refInt(string(v.(json.Number)))
			if created < n {
				return false, true
			}
		case k == "until":
			n, _ := refInt(string(v.(json.Number)))
			if created > n {
				return false, true
			}
		case k == "limit":
		case strings.HasPrefix(k, "#"):
			found := false
			for _, tag := range ev["tags"].([]any) {
				tag := tag.([]any)
				if len(tag) >= 2 && tag[0].(string) == k[1:] && contains(v, tag[1].(string)) {
					found = true
				}
			}
			if !found {
				return false, true
			}
		default:
			return false, false
		}
	}
	return true, true
}

func decodeNumbers(s string, v any) bool {
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.UseNumber()
	return d.Decode(v) == nil
}

// refInt reads a JSON number as an int64 with math/big, independently of
// jsonInt: ok when its value is a whole number in int64's range.
func refInt(s string) (int64, bool) {
	n, whole, inRange, known := refJSONInt(s)
	return n, known && whole && inRange
}

// refJSONInt is jsonInt's reference: big.Rat reads the number exactly.
// big.Rat refuses exponents past a million; a number of at most
// maxRefDigits characters with an exponent that large is known without
// it: zero, or a whole number out of range (a positive exponent), or a
// fraction (a negative one). known is false past that.
func refJSONInt(s string) (n int64, whole, inRange, known bool) {
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	if hasExp {
		e := strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")
		if len(e) > 6 {
			if len(s) > maxRefDigits {
				return 0, false, false, false
			}
			switch {
			case strings.Trim(mant, "-0.") == "":
				return 0, true, true, true
			case strings.HasPrefix(exp, "-"):
				return 0, false, true, true
			}
			return 0, true, false, true
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, false, false, false
	}
	if !r.IsInt() {
		return 0, false, true, true
	}
	if !r.Num().IsInt64() {
		return 0, true, false, true
	}
	return r.Num().Int64(), true, true, true
}

const maxRefDigits = 1000

// jsonNumber is the grammar of a JSON number (RFC 8259), which is all
// that reaches jsonInt.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// FuzzJSONInt: jsonInt reads every form of a JSON number as math/big
// does: its value when it is a whole number in int64's range (1e3,
// 1000.0), a fraction refused as one (1.5), a whole number past int64
// refused as out of range.
func FuzzJSONInt(f *testing.F) {
	for _, s := range []string{
		"0", "-0", "-0.0", "1000", "1e3", "1E3", "1e+3", "1000.0", "10000e-1", "0.1e4", "1.5", "15e-1",
		"1.000000000000000000001e3", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "-9223372036854775809", "922337203685477580.7e1",
		"-92233720368547758.08e2", "1e18", "1e19", "0e999999999999", "1e999999999999",
		"1e-999999999999", "100e-2", "0.00100e3", "-1E+2", "00", "1e-0", "12345678901234567890e-1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > maxRefDigits || !jsonNumber.MatchString(s) {
			return
		}
		n, whole, inRange := jsonInt(s)
		wn, wwhole, winRange, known := refJSONInt(s)
		if !known {
			return
		}
		if whole != wwhole || whole && (inRange != winRange || inRange && n != wn) {
			t.Fatalf("jsonInt(%q) = %d, whole %v, in range %v; math/big: %d, %v, %v", s, n, whole, inRange, wn, wwhole, winRange)
		}
	})
}
