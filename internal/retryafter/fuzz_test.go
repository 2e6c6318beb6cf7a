package retryafter_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/retryafter"
)

// FuzzParse feeds arbitrary Retry-After values, as a peer or a model
// server sends them, to Parse. It never panics nor returns a negative
// wait, and a wait it reads, written again in either form, reads the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "7", " 120 ", "-1", "1e3", "99999999999999999999", "9223372036854775807",
		"Fri, 01 May 2026 12:00:30 GMT", "Friday, 01-May-26 12:00:30 GMT", "Fri May  1 12:00:30 2026", "Fri, 01 May 2026 11:00:00 GMT"} {
		f.Add(s)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d := retryafter.Parse(v, now)
		if d < 0 {
			t.Fatalf("Parse(%q) = %v", v, d)
		}
		if d == 0 || d%time.Second != 0 {
			return
		}
		if d < 1<<62 {
			if again := retryafter.Parse(strconv.FormatInt(int64(d/time.Second), 10), now); again != d {
				t.Fatalf("Parse(%q) = %v, but %v written in seconds reads %v", v, d, d, again)
			}
		}
		if d < 100*365*24*time.Hour {
			date := now.Add(d).Format(http.TimeFormat)
			if again := retryafter.Parse(date, now); again != d {
				t.Fatalf("Parse(%q) = %v, but %s reads %v", v, d, date, again)
			}
		}
	})
}
