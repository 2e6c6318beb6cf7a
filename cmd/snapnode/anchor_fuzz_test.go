package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/lowerhex"
)

// FuzzParseAnchor feeds --anchor's SEQ:HASH to parseAnchor. It never
// panics; it takes what is a seq (a decimal from 0) before the first
// colon and 64 lowercase hex digits after it, and nothing else; and the
// anchor it reads, written again as audit verify prints a head, reads the
// same.
func FuzzParseAnchor(f *testing.F) {
	hash := strings.Repeat("0f", 32)
	for _, s := range []string{"12:" + hash, "0:" + hash, "-1:" + hash, "+7:" + hash, "007:" + hash, "1:" + strings.ToUpper(hash),
		"1:" + hash + ":", "1" + hash, ":" + hash, "9223372036854775808:" + hash, "1_0:" + hash, "0x1:" + hash, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		a, err := parseAnchor(v)
		seq, hash, ok := strings.Cut(v, ":")
		n, nerr := strconv.ParseInt(seq, 10, 64)
		want := ok && nerr == nil && n >= 0 && lowerhex.Valid(hash, 64)
		if (err == nil) != want {
			t.Fatalf("parseAnchor(%q) = %+v, %v; want it taken: %v", v, a, err, want)
		}
		if err != nil {
			return
		}
		if a.Seq != n || a.Hash != hash {
			t.Fatalf("parseAnchor(%q) = %+v", v, a)
		}
		if again, err := parseAnchor(strconv.FormatInt(a.Seq, 10) + ":" + a.Hash); err != nil || again != a {
			t.Fatalf("%+v written again reads %+v, %v", a, again, err)
		}
	})
}
