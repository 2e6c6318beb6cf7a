package sqldb

// SetAfterCheckpoint makes the SQLite committer of db call f after each
// checkpoint it asked for, done or failed. Set it before the first write.
func SetAfterCheckpoint(db *DB, f func()) { db.commit.afterCheckpoint = f }
