package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// BenchmarkWriteFile measures one WRITE_FILE through the sandbox (Stage:
// normalise, read the pre-image, walk for the quota, diff; Promote:
// re-check the pre-image, temporary file, fsync, rename, directory fsync)
// beside a plain open+write+fsync+close of the same bytes and the same
// durable protocol done by hand (os-atomic), in the same run.
// Each iteration changes the content, so every promotion really writes.
func BenchmarkWriteFile(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"4KiB", 4 << 10}, {"64KiB", 64 << 10}} {
		contents := [2][]byte{make([]byte, size.n), make([]byte, size.n)}
		for i := range contents[0] {
			contents[0][i] = 'a' + byte(i%26)
			contents[1][i] = 'a' + byte(i%26)
			if i%64 == 63 {
				contents[0][i], contents[1][i] = '\n', '\n'
			}
		}
		contents[1][0] = 'Z'

		b.Run(size.name+"/sandbox", func(b *testing.B) {
			_, sb := newSandbox(b, sandbox.Limits{}, map[string]string{"notes/": ""})
			ctx := context.Background()
			b.SetBytes(int64(size.n))
			i := 0
			for b.Loop() {
				st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/notes/log.txt", Content: contents[i%2]}})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := sb.Promote(ctx, st); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(size.name+"/os", func(b *testing.B) {
			p := filepath.Join(b.TempDir(), "log.txt")
			b.SetBytes(int64(size.n))
			i := 0
			for b.Loop() {
				f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Write(contents[i%2]); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		// The same durable protocol by hand, without any of the checks:
		// temporary file, fsync, rename, directory fsync.
		b.Run(size.name+"/os-atomic", func(b *testing.B) {
			dir := b.TempDir()
			p := filepath.Join(dir, "log.txt")
			b.SetBytes(int64(size.n))
			i := 0
			for b.Loop() {
				tmp := p + ".tmp"
				f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.Write(contents[i%2]); err != nil {
					b.Fatal(err)
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
				if err := os.Rename(tmp, p); err != nil {
					b.Fatal(err)
				}
				d, err := os.Open(dir)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Sync(); err != nil {
					b.Fatal(err)
				}
				d.Close()
				i++
			}
		})
	}
}

// BenchmarkStage is the staging half alone (no fsync): where the time goes
// that is not the disk's.
func BenchmarkStage(b *testing.B) {
	_, sb := newSandbox(b, sandbox.Limits{}, map[string]string{"notes/log.txt": "old\n"})
	content := make([]byte, 4<<10)
	for i := range content {
		content[i] = 'a' + byte(i%26)
	}
	ctx := context.Background()
	for b.Loop() {
		if _, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/notes/log.txt", Content: content}}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	_, sb := newSandbox(b, sandbox.Limits{}, map[string]string{"notes/log.txt": string(make([]byte, 4<<10))})
	ctx := context.Background()
	b.SetBytes(4 << 10)
	for b.Loop() {
		if _, err := sb.Read(ctx, "/sandbox/notes/log.txt"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNormalize(b *testing.B) {
	for name, p := range map[string]string{
		"ascii":   "/sandbox/projects/snapnode/notes/2026-01-01.md",
		"unicode": "/sandbox/プロジェクト/メモ/café-résumé.md",
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := sandbox.Normalize(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkListFirst measures the agent's view of a workspace of 1,000
// files: the first 50 entries by name (ListFirst), beside List of all of
// them as the baseline of the same run.
func BenchmarkListFirst(b *testing.B) {
	files := map[string]string{}
	for i := range 1000 {
		files[fmt.Sprintf("note-%04d.md", i)] = "n"
	}
	_, sb := newSandbox(b, sandbox.Limits{MaxEntries: 1000}, files)
	ctx := context.Background()
	b.Run("baseline=List", func(b *testing.B) {
		for range b.N {
			if _, err := sb.List(ctx, "/sandbox/"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ListFirst=50", func(b *testing.B) {
		for range b.N {
			if _, _, err := sb.ListFirst(ctx, "/sandbox/", 50); err != nil {
				b.Fatal(err)
			}
		}
	})
}
