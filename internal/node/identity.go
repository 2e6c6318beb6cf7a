package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// ErrOtherIdentity: the database is another node's: it records another
// address than the node's as the one it was made by.
var ErrOtherIdentity = errors.New("the database is another node's")

// A task database is one identity's: its tasks were asked of that
// address, its jobs run and its audit log written under it. The node
// records its address in the database (sqlstore.Store.RecordIdentity) at
// its first start, and refuses to start on a database that records
// another (checkIdentity), before it takes a task, a job or an audit
// entry from it (its schema alone may be brought up to date first). A database
// made by a build before the record gets the node's address at its first
// start after the upgrade, once the audit log's check at start has
// passed (checkSealRecord: a log whose seals another key signed is
// refused, and nothing is recorded, so that the key that sealed it may
// still start on it). Replicas on one PostgreSQL database share one
// identity: the first to start records it, and the others, with the same
// key, find it.

// checkIdentity refuses the start of the node whose key is key on the
// database of cfg when that database records another node's address
// (recorded; "" when it records none yet).
func checkIdentity(cfg config.Config, recorded string, key *identity.Key, network identity.Network) error {
	mine := key.Address(network)
	if recorded == "" || recorded == mine {
		return nil
	}
	db := "the PostgreSQL database of the settings (database, --database or SNAPNODE_DATABASE)"
	if path, ok := sqldb.SQLitePath(cfg.DatabaseDSN()); ok {
		db = "the task database " + path
	}
	// The same key on the other network: --testnet changed, not the key.
	other := identity.Testnet
	if network == identity.Testnet {
		other = identity.Mainnet
	}
	if key.Address(other) == recorded {
		return fmt.Errorf("node: %w: %s belongs to %s, this node's key on the other network, and the node now runs on %s as %s (testnet changed in the settings or on the command line); the node does not start on it. "+
			"Start it as it was (testnet %t), or give it a new data folder (or another PostgreSQL database) to start on this network anew",
			ErrOtherIdentity, db, recorded, networkName(network), mine, network != identity.Testnet)
	}
	return fmt.Errorf("node: %w: %s belongs to %s (recorded at that node's first start on it), and this node's key is %s's; the node does not start on it, for it would answer %s's tasks, run its jobs and carry its audit log on under another address. "+
		"Start it with %s's key (the key file it had: key_file, --key or SNAPNODE_KEY; a backup has it as identity.key); "+
		"or, for %s to start as a node of its own, give it a new data folder (or another PostgreSQL database), keeping this one",
		ErrOtherIdentity, db, recorded, mine, recorded, recorded, mine)
}

// Network is the network a node on cfg runs on: identity.Testnet with
// the setting testnet (a testnet or signet node, tb1p… addresses), else
// identity.Mainnet (bc1p…).
func Network(cfg config.Config) identity.Network {
	if cfg.Testnet {
		return identity.Testnet
	}
	return identity.Mainnet
}

func networkName(n identity.Network) string {
	if n == identity.Testnet {
		return "testnet"
	}
	return "mainnet"
}

// recordIdentity records the node's address in its database when the
// database records none yet (a new database, or one made before the
// record), after the audit log's check at start, and checks what the
// database then records: a replica with another key that started at the
// same moment may have recorded first.
func recordIdentity(ctx context.Context, cfg config.Config, store *sqlstore.Store, key *identity.Key, network identity.Network, logger *slog.Logger) error {
	recorded, err := store.RecordIdentity(ctx, key.Address(network))
	if err != nil {
		return fmt.Errorf("node: task database: %w", err)
	}
	if err := checkIdentity(cfg, recorded, key, network); err != nil {
		return err
	}
	logger.Info("database: recorded this node's address as the one the database belongs to; a node with another key is refused on it", "address", recorded)
	return nil
}
