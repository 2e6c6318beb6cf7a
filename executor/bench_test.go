package executor_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
)

// benchFiles is how many files the benchmarks write in turn: each write
// replaces an earlier one with content of the same size, so the
// workspace does not grow during the run.
const benchFiles = 64

// benchWrite returns the proposal of write i and the bytes it writes.
func benchWrite(i int) (path string, content string, data []byte) {
	path = fmt.Sprintf("/sandbox/f%02d.txt", i%benchFiles)
	content = fmt.Sprintf("entry %012d %s\n", i, "lorem ipsum dolor sit amet, consectetur adipiscing elit")
	data = fmt.Appendf(nil, `{"schema_version":"1.0.0","id":"6a1f0c3e-2b4d-4e5f-8a9b-0c1d2e3f4a5b",`+
		`"reasoning":"benchmark","action":"WRITE_FILE","args":{"path":%q,"content":%q}}`, path, content)
	return path, content, data
}

// plainWrite is the baseline: the same bytes written with os.WriteFile's
// open, write and close, plus the fsync that makes them durable.
func plainWrite(b *testing.B, dir, path, content string) {
	f, err := os.OpenFile(filepath.Join(dir, filepath.Base(path)), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

func executorWrite(b *testing.B, v *env, data []byte) {
	res, err := v.ex.Run(context.Background(), executor.Request{TaskID: "bench", Requester: agent, Data: data})
	if err != nil {
		b.Fatal(err)
	}
	if res.Outcome != executor.Completed {
		b.Fatalf("outcome %s: %s", res.Outcome, res.Output)
	}
}

// BenchmarkWriteFile measures WRITE_FILE proposals through the whole
// executor (validation, descriptor, policy, staging and diff, snapshot
// record, promotion with fsync and rename, five audit entries) on SQLite
// (synchronous FULL) and, when SNAPNODE_TEST_POSTGRES is set, PostgreSQL;
// and beside them, in the same run and on the same file system, a plain
// write+fsync of the same bytes to the same file names.
func BenchmarkWriteFile(b *testing.B) {
	b.Run("executor/sqlite", func(b *testing.B) {
		v := newEnv(b, testdb.SQLite(b))
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, _, data := benchWrite(i)
			executorWrite(b, v, data)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
	})
	if os.Getenv(testdb.PostgresEnv) != "" {
		b.Run("executor/postgres", func(b *testing.B) {
			v := newEnv(b, testdb.Postgres(b))
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				_, _, data := benchWrite(i)
				executorWrite(b, v, data)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "proposals/s")
		})
	}
	b.Run("baseline/write+fsync", func(b *testing.B) {
		dir := b.TempDir()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			path, content, _ := benchWrite(i)
			plainWrite(b, dir, path, content)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
	})
}

// BenchmarkWriteFileRatio alternates one executor WRITE_FILE (SQLite)
// and one plain write+fsync of the same bytes, timing each, and reports
// both rates and how many times slower the executor is: the two share
// every moment of the machine's load.
func BenchmarkWriteFileRatio(b *testing.B) {
	v := newEnv(b, testdb.SQLite(b))
	dir := b.TempDir()
	var exec, plain time.Duration
	for i := 0; b.Loop(); i++ {
		path, content, data := benchWrite(i)
		t0 := time.Now()
		executorWrite(b, v, data)
		t1 := time.Now()
		plainWrite(b, dir, path, content)
		exec += t1.Sub(t0)
		plain += time.Since(t1)
	}
	n := float64(b.N)
	b.ReportMetric(n/exec.Seconds(), "executor-proposals/s")
	b.ReportMetric(n/plain.Seconds(), "plain-writes/s")
	b.ReportMetric(exec.Seconds()/plain.Seconds(), "ratio")
}
