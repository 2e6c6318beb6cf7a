package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// stageFixture is the sandbox every staging case starts from.
var stageFixture = map[string]string{
	"notes.md":  "line one\nline two\nline three\n",
	"bin.txt":   "\x00\x01\x02binary",
	"sub/":      "",
	"sub/a.txt": "a\n",
	"tool.sh":   "#!/bin/sh\n",
	"tool.md":   "#!/bin/sh\n",
}

// TestStageGolden stages each case and compares what Touched and Diffs
// report with testdata/golden/<case>.json (go test -update rewrites them).
func TestStageGolden(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changes []sandbox.Change
	}{
		{"create_text", []sandbox.Change{sandbox.Write{Path: "/sandbox/new.md", Content: []byte("# New\n\nhello\n")}}},
		{"modify_text", []sandbox.Change{sandbox.Write{Path: "/sandbox/notes.md", Content: []byte("line one\nline 2\nline three\n")}}},
		{"delete_text", []sandbox.Change{sandbox.Delete{Path: "/sandbox/notes.md"}}},
		{"binary_overwrite", []sandbox.Change{sandbox.Write{Path: "/sandbox/bin.txt", Content: []byte("\x00\x03")}}},
		{"text_to_binary", []sandbox.Change{sandbox.Write{Path: "/sandbox/notes.md", Content: []byte{0xff, 0xfe}}}},
		{"rename", []sandbox.Change{sandbox.Rename{From: "/sandbox/notes.md", To: "/sandbox/sub/moved.txt"}}},
		{"mkdir_then_write", []sandbox.Change{
			sandbox.Mkdir{Path: "/sandbox/docs"},
			sandbox.Mkdir{Path: "/sandbox/docs/deep"},
			sandbox.Write{Path: "/sandbox/docs/deep/readme.md", Content: []byte("deep\n")},
		}},
		{"same_content_touches_nothing", []sandbox.Change{sandbox.Write{Path: "/sandbox/sub/a.txt", Content: []byte("a\n")}}},
		{"write_then_delete_touches_nothing", []sandbox.Change{
			sandbox.Write{Path: "/sandbox/tmp.txt", Content: []byte("x")},
			sandbox.Delete{Path: "/sandbox/tmp.txt"},
		}},
		{"delete_then_rename_over", []sandbox.Change{
			sandbox.Delete{Path: "/sandbox/sub/a.txt"},
			sandbox.Rename{From: "/sandbox/notes.md", To: "/sandbox/sub/a.txt"},
		}},
		{"file_becomes_directory", []sandbox.Change{
			sandbox.Delete{Path: "/sandbox/sub/a.txt"},
			sandbox.Mkdir{Path: "/sandbox/sub/a.txt"},
			sandbox.Write{Path: "/sandbox/sub/a.txt/inner.md", Content: []byte("inner\n")},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
			before := treeHash(t, dir)
			st, err := sb.Stage(context.Background(), tc.changes)
			if err != nil {
				t.Fatal(err)
			}
			if after := treeHash(t, dir); after != before {
				t.Fatal("Stage touched the folder")
			}
			got, err := json.MarshalIndent(struct {
				Touched []string       `json:"touched"`
				Diffs   []sandbox.Diff `json:"diffs"`
			}{st.Touched(), st.Diffs()}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "golden", tc.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("diffs differ from %s:\n%s", golden, got)
			}
		})
	}
}

func TestStageErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changes []sandbox.Change
		want    error
	}{
		{"write without parent", []sandbox.Change{sandbox.Write{Path: "/sandbox/nope/a.txt", Content: []byte("x")}}, fs.ErrNotExist},
		{"write non-text", []sandbox.Change{sandbox.Write{Path: "/sandbox/a.sh", Content: []byte("x")}}, sandbox.ErrNotText},
		{"write over a directory", []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/d.md"}, sandbox.Write{Path: "/sandbox/d.md", Content: []byte("x")}}, sandbox.ErrNotRegular},
		{"write under a file", []sandbox.Change{sandbox.Write{Path: "/sandbox/notes.md/x.txt", Content: []byte("x")}}, sandbox.ErrNotDir},
		{"mkdir existing", []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/sub"}}, sandbox.ErrExists},
		{"mkdir root", []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/"}}, sandbox.ErrExists},
		{"mkdir without parent", []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/x/y"}}, fs.ErrNotExist},
		{"delete missing", []sandbox.Change{sandbox.Delete{Path: "/sandbox/missing.txt"}}, fs.ErrNotExist},
		{"delete twice", []sandbox.Change{sandbox.Delete{Path: "/sandbox/notes.md"}, sandbox.Delete{Path: "/sandbox/notes.md"}}, fs.ErrNotExist},
		{"delete non-text", []sandbox.Change{sandbox.Delete{Path: "/sandbox/tool.sh"}}, sandbox.ErrNotText},
		{"rename missing", []sandbox.Change{sandbox.Rename{From: "/sandbox/missing.txt", To: "/sandbox/b.txt"}}, fs.ErrNotExist},
		{"rename onto existing", []sandbox.Change{sandbox.Rename{From: "/sandbox/notes.md", To: "/sandbox/sub/a.txt"}}, sandbox.ErrExists},
		{"rename onto itself", []sandbox.Change{sandbox.Rename{From: "/sandbox/notes.md", To: "/sandbox/notes.md"}}, sandbox.ErrExists},
		{"rename a directory", []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/d.md"}, sandbox.Rename{From: "/sandbox/d.md", To: "/sandbox/sub.txt"}}, sandbox.ErrNotRegular},
		{"rename a non-text source away", []sandbox.Change{sandbox.Rename{From: "/sandbox/tool.sh", To: "/sandbox/tool.txt"}}, sandbox.ErrNotText},
		{"rename to non-text", []sandbox.Change{sandbox.Rename{From: "/sandbox/notes.md", To: "/sandbox/notes.sh"}}, sandbox.ErrNotText},
		{"bad path in a composite", []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/ok"}, sandbox.Mkdir{Path: "/sandbox/../x"}}, sandbox.RuleDotSegment},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
			before := treeHash(t, dir)
			st, err := sb.Stage(context.Background(), tc.changes)
			if !errors.Is(err, tc.want) || st != nil {
				t.Fatalf("Stage = %v, %v; want %v", st, err, tc.want)
			}
			if after := treeHash(t, dir); after != before {
				t.Fatal("a failed Stage touched the folder")
			}
		})
	}
}

func TestWithin(t *testing.T) {
	_, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	st, err := sb.Stage(context.Background(), []sandbox.Change{
		sandbox.Rename{From: "/sandbox/notes.md", To: "/sandbox/sub/moved.md"},
		sandbox.Write{Path: "/sandbox/sub/a.txt", Content: []byte("changed\n")},
		sandbox.Write{Path: "/sandbox/new.txt", Content: []byte("new\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"/sandbox/new.txt", "/sandbox/notes.md", "/sandbox/sub/a.txt", "/sandbox/sub/moved.md"}
	if got := st.Touched(); !slices.Equal(got, all) {
		t.Fatalf("Touched = %v, want %v", got, all)
	}
	if err := st.Within(all); err != nil {
		t.Fatalf("Within(all) = %v", err)
	}
	if err := st.Within(append(all, "/sandbox/unrelated.txt")); err != nil {
		t.Fatalf("declaring more than touched: %v", err)
	}
	// Declaring the rename's destination only leaves its source undeclared.
	err = st.Within([]string{"/sandbox/sub/moved.md", "/sandbox/sub/a.txt", "/sandbox/new.txt"})
	var se *sandbox.ScopeError
	if !errors.As(err, &se) || !errors.Is(err, sandbox.ErrUndeclared) || !slices.Equal(se.Undeclared, []string{"/sandbox/notes.md"}) {
		t.Fatalf("Within without the source = %v", err)
	}
	if err := st.Within([]string{"/sandbox/*.txt", "/sandbox/sub/*"}); !errors.Is(err, sandbox.ErrUndeclared) {
		t.Fatalf("patterns are not expanded: %v", err)
	}
	if err := st.Within([]string{"/sandbox/../new.txt"}); !errors.Is(err, sandbox.RuleDotSegment) {
		t.Fatalf("a bad declared path: %v", err)
	}

	ok := sandbox.Effects{
		Create: []string{"/sandbox/new.txt", "/sandbox/sub/moved.md"},
		Modify: []string{"/sandbox/sub/a.txt"},
		Delete: []string{"/sandbox/notes.md"},
	}
	if err := st.WithinEffects(ok); err != nil {
		t.Fatalf("WithinEffects = %v", err)
	}
	wrongKind := sandbox.Effects{
		Create: []string{"/sandbox/new.txt", "/sandbox/sub/moved.md"},
		Modify: []string{"/sandbox/sub/a.txt", "/sandbox/notes.md"},
	}
	err = st.WithinEffects(wrongKind)
	if !errors.As(err, &se) || !slices.Equal(se.Undeclared, []string{"/sandbox/notes.md"}) {
		t.Fatalf("a delete declared as a modify = %v", err)
	}
}

func TestStageLimits(t *testing.T) {
	ctx := context.Background()
	t.Run("file size", func(t *testing.T) {
		_, sb := newSandbox(t, sandbox.Limits{MaxFileSize: 8}, map[string]string{"big.txt": "123456789"})
		_, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/a.txt", Content: []byte("123456789")}})
		var le *sandbox.LimitError
		if !errors.As(err, &le) || le.Limit != sandbox.LimitFileSize || le.Got != 9 || le.Max != 8 || le.Path != "/sandbox/a.txt" {
			t.Fatalf("write over the cap: %v", err)
		}
		if _, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/a.txt", Content: []byte("12345678")}}); err != nil {
			t.Fatalf("write at the cap: %v", err)
		}
		// A file over the cap cannot be touched (its pre-image would not fit).
		_, err = sb.Stage(ctx, []sandbox.Change{sandbox.Delete{Path: "/sandbox/big.txt"}})
		if !errors.As(err, &le) || le.Limit != sandbox.LimitFileSize {
			t.Fatalf("delete of a file over the cap: %v", err)
		}
	})
	t.Run("total bytes", func(t *testing.T) {
		_, sb := newSandbox(t, sandbox.Limits{MaxTotalBytes: 100}, map[string]string{"a.txt": string(make([]byte, 60)), "d/b.txt": string(make([]byte, 20))})
		_, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/c.txt", Content: make([]byte, 21)}})
		var le *sandbox.LimitError
		if !errors.As(err, &le) || le.Limit != sandbox.LimitTotalBytes || le.Got != 101 {
			t.Fatalf("growing past the quota: %v", err)
		}
		if _, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/c.txt", Content: make([]byte, 20)}}); err != nil {
			t.Fatalf("growing to the quota: %v", err)
		}
		// Replacing a file counts the difference only.
		if _, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/a.txt", Content: make([]byte, 80)}}); err != nil {
			t.Fatalf("replacing within the quota: %v", err)
		}
		if c, err := sb.Counts(ctx); err != nil || c != (sandbox.Counts{Bytes: 80, Files: 2, Dirs: 1}) {
			t.Fatalf("Counts = %+v, %v; want 80 bytes in 2 files and 1 directory", c, err)
		}
	})
	t.Run("changes", func(t *testing.T) {
		_, sb := newSandbox(t, sandbox.Limits{MaxChanges: 2}, nil)
		three := []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/a"}, sandbox.Mkdir{Path: "/sandbox/b"}, sandbox.Mkdir{Path: "/sandbox/c"}}
		if _, err := sb.Stage(ctx, three); !errors.Is(err, sandbox.ErrLimit) {
			t.Fatalf("three changes: %v", err)
		}
		if _, err := sb.Stage(ctx, three[:2]); err != nil {
			t.Fatalf("two changes: %v", err)
		}
	})
	t.Run("narrow", func(t *testing.T) {
		_, sb := newSandbox(t, sandbox.Limits{MaxFileSize: 100}, nil)
		n := sb.Narrow(sandbox.Limits{MaxFileSize: 4, MaxEntries: 0})
		if n.Limits().MaxFileSize != 4 || n.Limits().MaxEntries != sb.Limits().MaxEntries {
			t.Fatalf("Narrow = %+v", n.Limits())
		}
		if sb.Narrow(sandbox.Limits{MaxFileSize: 1000}).Limits().MaxFileSize != 100 {
			t.Fatal("Narrow widened a cap")
		}
		if _, err := n.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/a.txt", Content: []byte("12345")}}); !errors.Is(err, sandbox.ErrLimit) {
			t.Fatalf("narrowed write: %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		_, sb := newSandbox(t, sandbox.Limits{}, nil)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := sb.Stage(cctx, []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/a"}})
		if !errors.Is(err, context.Canceled) || errors.Is(err, sandbox.ErrLimit) {
			t.Fatalf("cancelled Stage = %v", err)
		}
	})
}

func TestOpenLimits(t *testing.T) {
	if _, err := sandbox.Open(t.TempDir(), sandbox.Limits{MaxFileSize: -1}); err == nil {
		t.Fatal("a negative cap was accepted")
	}
	sb, err := sandbox.Open(t.TempDir(), sandbox.Limits{MaxEntries: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	want := sandbox.DefaultLimits()
	want.MaxEntries = 7
	if sb.Limits() != want {
		t.Fatalf("Limits = %+v, want %+v", sb.Limits(), want)
	}
	if _, err := sandbox.Open(filepath.Join(t.TempDir(), "missing"), sandbox.Limits{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a missing folder: %v", err)
	}
}
