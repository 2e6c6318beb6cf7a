package sqlstore

import (
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// openPostgres returns a database/sql pool of pgx connections to the server
// of cfg. PostgreSQL is reached through database/sql, like SQLite, so the
// store is written once; pgx's stdlib adapter does the protocol, the types
// and each connection's statement cache. (pgxpool would split the store
// into a database/sql half and a pgx half.)
func openPostgres(cfg *pgx.ConnConfig) *sql.DB {
	return stdlib.OpenDB(*cfg)
}
