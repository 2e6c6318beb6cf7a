package embedded

import (
	"embed"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// The relay's tables, embedded (SQLite only) and recorded in the
// database's snapnode_migrations as "relay" (older builds kept the version
// in PRAGMA user_version).
//
//go:embed migrations
var migrationFiles embed.FS

func migrations() sqldb.Migrations {
	m := sqldb.Embedded(migrationFiles, "migrations", "relay")
	m.Legacy = sqldb.LegacyUserVersion
	return m
}
