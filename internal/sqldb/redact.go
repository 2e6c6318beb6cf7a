package sqldb

import (
	"net/url"
	"strings"
)

// Redacted is dsn as a message or a command printed for an operator may
// show it: a PostgreSQL URL (its scheme in any letter case) with its
// passwords, the user part's and the query's password and sslpassword,
// shown as xxxxx; one that does not parse, and a PostgreSQL key=value
// string, not shown at all; any other DSN (a SQLite file) as it is.
func Redacted(dsn string) string {
	lower := strings.ToLower(dsn)
	if libpqKeywords(dsn) {
		return "(a PostgreSQL key=value string, not shown)"
	}
	if !strings.HasPrefix(lower, "postgres://") && !strings.HasPrefix(lower, "postgresql://") {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://…"
	}
	q, masked := u.Query(), false
	for _, k := range []string{"password", "sslpassword"} {
		if q.Has(k) {
			q.Set(k, "xxxxx")
			masked = true
		}
	}
	if masked {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
