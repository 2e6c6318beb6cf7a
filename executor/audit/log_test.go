package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testdb"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// specHash computes an entry's hash from the description at Hash, written
// out again independently of prefixHash, as an outside tool would.
func specHash(e Entry) string {
	var b bytes.Buffer
	str := func(s string) {
		_ = binary.Write(&b, binary.BigEndian, uint32(len(s)))
		b.WriteString(s)
	}
	str("snapnode-audit-v1")
	_ = binary.Write(&b, binary.BigEndian, e.Time.UnixMicro())
	for _, s := range []string{e.Actor, e.Task, e.Action, string(e.Step), e.Decision, e.Reason, e.PolicyVersion,
		e.PreHash, e.PostHash, string(e.Detail), e.Prev} {
		str(s)
	}
	_ = binary.Write(&b, binary.BigEndian, e.Seq)
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}

// hashVector is an entry and its hash. The detail is a string of its own:
// encoding/json would reformat a json.RawMessage.
type hashVector struct {
	Entry  Entry  `json:"entry"`
	Detail string `json:"detail_bytes"`
	Hash   string `json:"hash"`
}

// The hash of fixed entries is pinned in testdata/hash_vectors.json (for
// other implementations), and equals the documented encoding.
func TestHashVectors(t *testing.T) {
	path := filepath.Join("testdata", "hash_vectors.json")
	if *update {
		var vs []hashVector
		prev := Genesis
		for i := range 6 {
			e, err := sample(i).check(DefaultMaxDetail)
			if err != nil {
				t.Fatal(err)
			}
			e.Seq = int64(i + 1)
			e.Time = time.Date(2026, 5, 1, 12, 0, i, 123456000, time.UTC)
			e.Prev = prev
			e.Hash = Hash(e)
			prev = e.Hash
			d := string(e.Detail)
			e.Detail = nil
			vs = append(vs, hashVector{e, d, e.Hash})
		}
		b, _ := json.MarshalIndent(vs, "", "\t")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var vs []hashVector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	if len(vs) < 6 {
		t.Fatalf("%d vectors", len(vs))
	}
	for i, v := range vs {
		if v.Detail != "" {
			v.Entry.Detail = json.RawMessage(v.Detail)
		}
		if got := Hash(v.Entry); got != v.Hash {
			t.Errorf("vector %d: Hash = %s, want %s", i, got, v.Hash)
		}
		if got := specHash(v.Entry); got != v.Hash {
			t.Errorf("vector %d: the documented encoding gives %s, want %s", i, got, v.Hash)
		}
		if i > 0 && v.Entry.Prev != vs[i-1].Hash {
			t.Errorf("vector %d does not chain to %d", i, i-1)
		}
	}
}

// Every field is hashed, and moving bytes from one field to the next
// changes the hash (the encoding is unambiguous).
func TestHashCoversEveryField(t *testing.T) {
	base := sample(3)
	base.Seq, base.Time, base.Prev = 7, time.UnixMicro(1_700_000_000_000_000).UTC(), strings.Repeat("c", 64)
	h0 := Hash(base)
	for name, change := range map[string]func(*Entry){
		"seq":            func(e *Entry) { e.Seq++ },
		"time":           func(e *Entry) { e.Time = e.Time.Add(time.Microsecond) },
		"actor":          func(e *Entry) { e.Actor += "x" },
		"task":           func(e *Entry) { e.Task += "x" },
		"action":         func(e *Entry) { e.Action += "x" },
		"step":           func(e *Entry) { e.Step = StepDenied },
		"decision":       func(e *Entry) { e.Decision += "x" },
		"reason":         func(e *Entry) { e.Reason += "x" },
		"policy_version": func(e *Entry) { e.PolicyVersion += "x" },
		"pre_hash":       func(e *Entry) { e.PreHash = strings.Repeat("d", 64) },
		"post_hash":      func(e *Entry) { e.PostHash = strings.Repeat("d", 64) },
		"detail":         func(e *Entry) { e.Detail = json.RawMessage(`{"a":2}`) },
		"prev":           func(e *Entry) { e.Prev = strings.Repeat("e", 64) },
		"hash is not":    nil,
		"task→action":    func(e *Entry) { e.Task, e.Action = e.Task+e.Action[:1], e.Action[1:] },
		"actor→task":     func(e *Entry) { e.Actor, e.Task = e.Actor[:len(e.Actor)-1], e.Actor[len(e.Actor)-1:]+e.Task },
	} {
		e := base
		e.Detail = slices.Clone(base.Detail)
		if change == nil {
			e.Hash = "anything"
			if Hash(e) != h0 {
				t.Errorf("%s: the stored hash changes the hash", name)
			}
			continue
		}
		change(&e)
		if Hash(e) == h0 {
			t.Errorf("changing %s leaves the hash unchanged", name)
		}
	}
}

func TestAppend(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newClock()
		db := openDB(t, dsn)
		l := openLog(t, db, Options{Now: clk.Now})
		if h, err := l.Head(ctx); err != nil || h != (Anchor{0, Genesis}) {
			t.Fatalf("Head of a new log = %v, %v", h, err)
		}
		var got []Entry
		for i := range 5 {
			in := sample(i)
			in.Seq, in.Prev, in.Hash, in.Time = 99, "ignored", "ignored", time.Unix(1, 0)
			e, err := l.Append(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Second)
			got = append(got, e)
		}
		prev := Genesis
		for i, e := range got {
			want := sample(i)
			if e.Seq != int64(i+1) || e.Prev != prev || e.Hash != Hash(e) {
				t.Errorf("entry %d: seq %d prev %s hash %s", i, e.Seq, e.Prev, e.Hash)
			}
			if wt := newClock().Now().Add(time.Duration(i) * time.Second).Truncate(time.Microsecond); !e.Time.Equal(wt) || e.Time.Location() != time.UTC {
				t.Errorf("entry %d: time %v, want %v UTC", i, e.Time, wt)
			}
			if e.Actor != want.Actor || e.Task != want.Task || e.Action != want.Action || e.Step != want.Step ||
				e.Reason != want.Reason || e.PreHash != want.PreHash || e.PostHash != want.PostHash {
				t.Errorf("entry %d: fields changed: %+v", i, e)
			}
			prev = e.Hash
		}
		// Detail is stored in its minimal form.
		if want := `{"path":"/sandbox/notes-0.md","bytes":0,"note":"<é & é>"}`; string(got[0].Detail) != want {
			t.Errorf("detail = %s, want %s", got[0].Detail, want)
		}
		if got[1].Detail != nil {
			t.Errorf("detail of entry 2 = %q, want none", got[1].Detail)
		}
		if h, err := l.Head(ctx); err != nil || h != (Anchor{5, got[4].Hash}) {
			t.Fatalf("Head = %v, %v", h, err)
		}
		stored, err := l.Query(ctx, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if !equalEntries(stored, got) {
			t.Fatalf("Query returned\n%+v\nwant\n%+v", stored, got)
		}

		// A batch: consecutive seqs, one time.
		batch, err := l.AppendBatch(ctx, []Entry{sample(5), sample(6), sample(7)})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range batch {
			if e.Seq != int64(6+i) || !e.Time.Equal(batch[0].Time) {
				t.Errorf("batch entry %d: seq %d time %v", i, e.Seq, e.Time)
			}
		}
		if batch[0].Prev != got[4].Hash || batch[1].Prev != batch[0].Hash {
			t.Error("batch not chained")
		}
		// A batch with one bad entry stores nothing.
		bad := sample(8)
		bad.Step = "exploded"
		if _, err := l.AppendBatch(ctx, []Entry{sample(8), bad}); !errors.Is(err, ErrInvalidEntry) {
			t.Fatalf("batch with a bad entry: %v", err)
		}
		if _, err := l.AppendBatch(ctx, make([]Entry, MaxBatch+1)); err == nil {
			t.Fatal("batch above MaxBatch accepted")
		}
		if h, _ := l.Head(ctx); h.Seq != 8 {
			t.Fatalf("head at %d after a refused batch, want 8", h.Seq)
		}
		rep, err := l.Verify(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := (Report{Entries: 8, First: 1, Last: 8, Checkpoint: Anchor{0, Genesis}, Head: Anchor{8, batch[2].Hash}, Unsealed: 8}); rep != want {
			t.Fatalf("Report = %+v, want %+v", rep, want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, sample(0)); !errors.Is(err, ErrClosed) {
			t.Fatalf("Append after Close: %v", err)
		}
	})
}

func equalEntries(a, b []Entry) bool {
	return slices.EqualFunc(a, b, func(x, y Entry) bool {
		return x.Seq == y.Seq && x.Time.Equal(y.Time) && x.Actor == y.Actor && x.Task == y.Task && x.Action == y.Action &&
			x.Step == y.Step && x.Decision == y.Decision && x.Reason == y.Reason && x.PolicyVersion == y.PolicyVersion &&
			x.PreHash == y.PreHash && x.PostHash == y.PostHash && bytes.Equal(x.Detail, y.Detail) && x.Prev == y.Prev && x.Hash == y.Hash
	})
}

// Each case of testdata/invalid_entries.json is refused with an
// *EntryError naming its field, and stores nothing.
func TestAppendInvalid(t *testing.T) {
	ctx := context.Background()
	l := openLog(t, openDB(t, testdb.SQLite(t)), Options{MaxDetail: 64})
	b, err := os.ReadFile(filepath.Join("testdata", "invalid_entries.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name      string `json:"name"`
		Entry     Entry  `json:"entry"`
		RawDetail string `json:"raw_detail"`
		Field     string `json:"field"`
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	bad := Entry{Actor: "host", Task: "t\xff", Step: StepReceived}
	cases = append(cases, struct {
		Name      string `json:"name"`
		Entry     Entry  `json:"entry"`
		RawDetail string `json:"raw_detail"`
		Field     string `json:"field"`
	}{"task not UTF-8", bad, "", "task"}, struct {
		Name      string `json:"name"`
		Entry     Entry  `json:"entry"`
		RawDetail string `json:"raw_detail"`
		Field     string `json:"field"`
	}{"detail not UTF-8", Entry{Actor: "host", Step: StepReceived}, "\"\xff\"", "detail"})
	for _, c := range cases {
		e := c.Entry
		if c.RawDetail != "" {
			e.Detail = json.RawMessage(c.RawDetail)
		}
		_, err := l.Append(ctx, e)
		var ee *EntryError
		if !errors.As(err, &ee) || !errors.Is(err, ErrInvalidEntry) || ee.Field != c.Field {
			t.Errorf("%s: err = %v, want an EntryError on %s", c.Name, err, c.Field)
		}
	}
	if h, _ := l.Head(ctx); h.Seq != 0 {
		t.Fatalf("%d entries stored", h.Seq)
	}
	// The limits themselves pass.
	ok := Entry{Actor: strings.Repeat("a", MaxIDLength), Step: StepJudged, Decision: strings.Repeat("d", MaxDecisionLength),
		Reason: "line 1\n\tline 2\r\n" + strings.Repeat("r", MaxReasonLength-16), Detail: json.RawMessage(`"` + strings.Repeat("x", 62) + `"`),
		PreHash: strings.Repeat("0", 64), PostHash: strings.Repeat("f", 64)}
	if _, err := l.Append(ctx, ok); err != nil {
		t.Fatalf("entry at the limits: %v", err)
	}
	// JSON null and blank details are no detail.
	for _, d := range []string{"null", " ", " null "} {
		e, err := l.Append(ctx, Entry{Actor: "host", Step: StepReceived, Detail: json.RawMessage(d)})
		if err != nil || e.Detail != nil {
			t.Errorf("detail %q: stored %q, %v", d, e.Detail, err)
		}
	}
}

func TestNewOptions(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, testdb.SQLite(t))
	for _, o := range []Options{{MaxEntries: -1}, {Retain: -time.Second}, {MaxDetail: -1}, {MaxDetail: MaxDetailLimit + 1}} {
		if _, err := New(ctx, db, o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
	// Two logs on one database, opened one after the other, share it.
	a, b := openLog(t, db, Options{}), openLog(t, db, Options{})
	if _, err := a.Append(ctx, sample(0)); err != nil {
		t.Fatal(err)
	}
	if e, err := b.Append(ctx, sample(1)); err != nil || e.Seq != 2 {
		t.Fatalf("second log appended seq %d, %v", e.Seq, err)
	}
	if v, err := db.SchemaVersion(ctx, "audit"); err != nil || v != 2 {
		t.Fatalf("schema version %d, %v", v, err)
	}
}

func TestQuery(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		clk := newClock()
		l := openLog(t, openDB(t, dsn), Options{Now: clk.Now})
		var all []Entry
		for i := range 20 {
			e, err := l.Append(ctx, sample(i))
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, e)
			clk.Advance(time.Minute)
		}
		pick := func(keep func(Entry) bool) []Entry {
			var out []Entry
			for _, e := range all {
				if keep(e) {
					out = append(out, e)
				}
			}
			return out
		}
		since := all[9].Time
		for _, c := range []struct {
			name string
			f    Filter
			want []Entry
		}{
			{"all", Filter{}, all},
			{"task", Filter{Task: "task-2"}, pick(func(e Entry) bool { return e.Task == "task-2" })},
			{"action", Filter{Action: all[7].Action}, pick(func(e Entry) bool { return e.Action == all[7].Action })},
			{"since", Filter{Since: since}, all[9:]},
			{"task and since", Filter{Task: "task-2", Since: since}, all[9:12]},
			{"after seq, limit", Filter{AfterSeq: 3, Limit: 4}, all[3:7]},
			{"no match", Filter{Task: "none"}, nil},
		} {
			got, err := l.Query(ctx, c.f)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if !equalEntries(got, c.want) {
				t.Errorf("%s: %d entries, want %d", c.name, len(got), len(c.want))
			}
		}
		if _, err := l.Query(ctx, Filter{Limit: MaxQueryLimit + 1}); err == nil {
			t.Error("limit above the maximum accepted")
		}
	})
}

// 8 goroutines × 200 appends build one gapless chain, and each caller got
// back exactly the entry stored.
func TestConcurrentAppend(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		l := openLog(t, openDB(t, dsn), Options{})
		const workers, each = 8, 200
		got := make([][]Entry, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					e := sample(i)
					e.Actor = fmt.Sprintf("worker-%d", w)
					out, err := l.Append(ctx, e)
					if err != nil {
						t.Error(err)
						return
					}
					got[w] = append(got[w], out)
				}
			})
		}
		wg.Wait()
		checkOneChain(t, l, workers*each, slices.Concat(got...))
	})
}

// Two databases opened on one PostgreSQL schema (or SQLite file), as two
// processes would, append concurrently: one chain.
func TestTwoProcesses(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		logs := []*Log{openLog(t, openDB(t, dsn), Options{}), openLog(t, openDB(t, dsn), Options{})}
		const perLog, workers, each = 2, 4, 100
		var (
			mu  sync.Mutex
			got []Entry
			wg  sync.WaitGroup
		)
		for n, l := range logs {
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						e := sample(i)
						e.Actor = fmt.Sprintf("node-%d/%d", n, w)
						out, err := l.Append(ctx, e)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						got = append(got, out)
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		checkOneChain(t, logs[0], perLog*workers*each, got)
	})
}

// checkOneChain verifies l holds n entries, exactly those the appenders
// got back.
func checkOneChain(t *testing.T, l *Log, n int, got []Entry) {
	t.Helper()
	ctx := context.Background()
	rep, err := l.Verify(ctx)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if rep.Entries != int64(n) || rep.First != 1 || rep.Last != int64(n) {
		t.Fatalf("Report %+v, want %d entries", rep, n)
	}
	if len(got) != n {
		t.Fatalf("appenders got %d entries, want %d", len(got), n)
	}
	slices.SortFunc(got, func(a, b Entry) int { return int(a.Seq - b.Seq) })
	var stored []Entry
	for after := int64(0); ; {
		page, err := l.Query(ctx, Filter{AfterSeq: after, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		stored = append(stored, page...)
		after = page[len(page)-1].Seq
	}
	if !equalEntries(stored, got) {
		t.Fatal("the entries stored are not those the appenders got back")
	}
}

// Verify and Export read one snapshot: while appenders and a pruner run,
// every Verify passes and every export verifies.
func TestVerifyWhileWriting(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		l := openLog(t, openDB(t, dsn), Options{MaxEntries: 150})
		l.pruneChunk = 20
		fill(t, l, 50)
		var wg sync.WaitGroup
		for w := range 3 {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					if _, err := l.Append(ctx, sample(i+w)); err != nil && ctx.Err() == nil {
						t.Error(err)
						return
					}
					if i%25 == 0 {
						if _, err := l.Prune(ctx); err != nil && ctx.Err() == nil {
							t.Error(err)
							return
						}
					}
				}
			})
		}
		// Verify at least 30 times, and until 400 entries were appended.
		for i := 0; ; i++ {
			if h, err := l.Head(ctx); err != nil {
				t.Fatal(err)
			} else if i >= 30 && h.Seq >= 400 {
				break
			}
			if _, err := l.Verify(ctx); err != nil {
				t.Fatalf("Verify %d while writing: %v", i, err)
			}
			var buf bytes.Buffer
			if err := l.Export(ctx, &buf, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := VerifyJSONL(&buf); err != nil {
				t.Fatalf("export %d while writing: %v", i, err)
			}
		}
		cancel()
		wg.Wait()
		rep, err := l.Verify(context.Background())
		if err != nil || rep.First == 1 {
			t.Fatalf("after writing: %+v, %v; want a pruned, valid chain", rep, err)
		}
	})
}
