package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestListFirst: a LIST_FILES the host asks to cut (Request.ListFirst)
// returns the first entries by name and, in "more", how many follow; the
// same proposal without it lists every entry and says nothing of more.
func TestListFirst(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		for i := range 12 {
			v.file(fmt.Sprintf("f%02d.txt", i), "x")
		}
		ctx := context.Background()
		list := prop("LIST_FILES", map[string]string{"path": "/sandbox/"})
		for _, c := range []struct {
			first, entries, more int
		}{{5, 5, 7}, {0, 12, 0}, {40, 12, 0}} {
			res, err := v.ex.Run(ctx, executor.Request{TaskID: "t1", Requester: agent, Data: list, ListFirst: c.first})
			if err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, res, executor.Completed)
			var raw struct {
				Result map[string]json.RawMessage `json:"result"`
			}
			var got executor.ListResult
			if err := json.Unmarshal(res.Output, &raw); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(res.Output, &struct {
				Result *executor.ListResult `json:"result"`
			}{&got}); err != nil {
				t.Fatal(err)
			}
			_, hasMore := raw.Result["more"]
			if len(got.Entries) != c.entries || got.More != c.more || hasMore != (c.more > 0) {
				t.Errorf("ListFirst %d: %d entries, more %d (member present %v); want %d, more %d", c.first, len(got.Entries), got.More, hasMore, c.entries, c.more)
			}
			if c.entries > 0 && got.Entries[0].Name != "f00.txt" {
				t.Errorf("ListFirst %d: first entry %s; want f00.txt", c.first, got.Entries[0].Name)
			}
		}
	})
}
