package main

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// TestJobReplayAlteredMessages: a database whose stored messages of a
// call were altered no longer rebuilds the exact request sent: job
// history and job replay exit 1, naming the interaction.
func TestJobReplayAlteredMessages(t *testing.T) {
	dir, id := jobDataDir(t)
	ctx := context.Background()
	db, err := sqldb.Open(ctx, "sqlite:"+filepath.Join(dir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE agent_interactions SET body = REPLACE(body, '"write a.md"', '"write b.md"') WHERE task_id = ? AND seq = 0`, id)
		return err
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"history", "replay"} {
		var out, errOut bytes.Buffer
		code := run([]string{"job", sub, "--data-dir", dir, id}, strings.NewReader(""), &out, &errOut)
		if code != exitFail || !strings.Contains(errOut.String(), "interaction 0") {
			t.Errorf("job %s of an altered copy: exit %d: %s%s", sub, code, out.String(), errOut.String())
		}
	}
}
