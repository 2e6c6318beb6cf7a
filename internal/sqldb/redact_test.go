package sqldb

import (
	"strings"
	"testing"
)

// Redacted shows no password of a PostgreSQL DSN, however it is given.
func TestRedacted(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"/var/lib/snapnode/tasks.db", "/var/lib/snapnode/tasks.db"},
		{"sqlite:tasks.db", "sqlite:tasks.db"},
		{"postgres://u:secret@db:5432/x?sslmode=disable", "postgres://u:xxxxx@db:5432/x?sslmode=disable"},
		{"POSTGRES://u:secret@db/x", "postgres://u:xxxxx@db/x"},
		{"postgresql://db/x?user=u&password=secret", "postgresql://db/x?password=xxxxx&user=u"},
		{"postgres://u@db/x?sslpassword=secret&sslkey=/k", "postgres://u@db/x?sslkey=%2Fk&sslpassword=xxxxx"},
		{"postgres://u:secret@db/x?password=secret", "postgres://u:xxxxx@db/x?password=xxxxx"},
		{"postgres://u:se%zzcret@db/x", "postgres://…"},
		{"host=db password=secret dbname=x", "(a PostgreSQL key=value string, not shown)"},
		{" password=secret", "(a PostgreSQL key=value string, not shown)"},
	} {
		got := Redacted(tc.dsn)
		if got != tc.want || strings.Contains(got, "secret") {
			t.Errorf("Redacted(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}
}
