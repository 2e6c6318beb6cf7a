// Package sqldb opens snapnode's SQL database — SQLite by default,
// PostgreSQL when several processes share one — and gives the components
// that keep their data there (the task store, the audit log) what they
// share: the dialect differences, group commits on SQLite and versioned,
// embedded migrations, recorded for every component in one table
// (snapnode_migrations).
//
//	db, err := sqldb.Open(ctx, "sqlite:/var/lib/snapnode/snapnode.db", sqldb.Options{})
//	if err != nil {
//		return err
//	}
//	defer db.Close()
//	//go:embed migrations
//	// var files embed.FS
//	err = db.Migrate(ctx, sqldb.Embedded(files, "migrations", "audit"))
//	err = db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, db.Dialect.Rebind("INSERT INTO t (a) VALUES (?)"), 1)
//		return err
//	})
//
// SQL is written once, with ? placeholders, in the subset both databases
// speak; Dialect.Rebind numbers the placeholders for PostgreSQL. SQLite runs
// in WAL mode with one writer connection (BEGIN IMMEDIATE) and a pool of
// read-only connections; see Open. Every SQLite connection keeps the
// statements it runs compiled (OpenSQLite), and the WAL is checkpointed
// beside the writer, not inside a caller's commit.
package sqldb
