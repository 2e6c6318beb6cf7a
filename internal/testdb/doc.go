// Package testdb gives tests a fresh database of each dialect: a SQLite
// file in a temporary folder, or a new schema of the PostgreSQL server
// named by SNAPNODE_TEST_POSTGRES (which .ci/run starts and sets).
//
//	func TestX(t *testing.T) {
//		testdb.Each(t, func(t *testing.T, dsn string) {
//			db, err := sqldb.Open(ctx, dsn, sqldb.Options{})
//			…
//		})
//	}
//
// Without the variable the PostgreSQL tests skip with a message saying how
// to run them, except under CI (CI set), where they fail: CI must never skip
// them silently.
package testdb
