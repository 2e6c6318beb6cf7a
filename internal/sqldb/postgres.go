package sqldb

import (
	"database/sql"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// OpenPostgres returns a database/sql pool of pgx connections to the server
// of cfg. PostgreSQL is reached through database/sql, like SQLite, so that
// the SQL is written once; pgx's stdlib adapter does the protocol, the
// types and each connection's statement cache. (pgxpool would split every
// caller into a database/sql half and a pgx half.)
func OpenPostgres(cfg *pgx.ConnConfig) *sql.DB {
	return stdlib.OpenDB(*cfg)
}
