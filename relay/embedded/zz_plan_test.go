package embedded

import (
	"context"
	"testing"
)

func TestZZPlan(t *testing.T) {
	st, err := openStore(context.Background(), t.TempDir()+"/p.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	for _, js := range []string{`{"kinds":[21339,4339],"#p":["x"]}`, `{"kinds":[31337],"#skill":["x"],"#d":["y"]}`, `{"authors":["a"],"kinds":[1]}`, `{}`, `{"ids":["a","b"]}`} {
		q, args := buildQuery(mustFilter(t, js), 500, 0)
		rows, err := st.r.Query("EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Log(js)
		for rows.Next() {
			var id, parent, notused int
			var detail string
			rows.Scan(&id, &parent, &notused, &detail)
			t.Log("   ", detail)
		}
		rows.Close()
	}
}
