package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// Stage two changes as one unit, check them against the declared effects,
// promote them, and roll them back.
func Example() {
	dir, _ := os.MkdirTemp("", "sandbox-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	sb, err := sandbox.Open(dir, sandbox.Limits{MaxFileSize: 1 << 20})
	if err != nil {
		panic(err)
	}
	defer sb.Close()

	st, err := sb.Stage(ctx, []sandbox.Change{
		sandbox.Mkdir{Path: "/sandbox/notes"},
		sandbox.Write{Path: "/sandbox/notes/today.md", Content: []byte("# Today\nship it\n")},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(st.Touched())
	fmt.Println(st.Within([]string{"/sandbox/notes"}))
	fmt.Println(st.Within([]string{"/sandbox/notes", "/sandbox/notes/today.md"}))
	fmt.Print(st.Diffs()[1].Unified)

	snap, err := sb.Promote(ctx, st)
	if err != nil {
		panic(err)
	}
	b, _ := sb.Read(ctx, "/sandbox/notes/today.md")
	fmt.Printf("%q\n", b)

	if err := sb.Rollback(ctx, snap); err != nil {
		panic(err)
	}
	_, err = sb.Read(ctx, "/sandbox/notes/today.md")
	fmt.Println(errors.Is(err, fs.ErrNotExist))
	// Output:
	// [/sandbox/notes /sandbox/notes/today.md]
	// sandbox: effects wider than declared: /sandbox/notes/today.md
	// <nil>
	// --- /dev/null
	// +++ /sandbox/notes/today.md
	// @@ -0,0 +1,2 @@
	// +# Today
	// +ship it
	// "# Today\nship it\n"
	// true
}

// Normalize rejects rather than repairs, and names the rule.
func ExampleNormalize() {
	for _, p := range []string{
		"/sandbox/notes/today.md",
		"/sandbox/",
		"/sandbox/%2e%2e/x.txt",
		"/sandbox/../etc/passwd",
		"/sandbox/notes/",
		"/sandbox/\u2024\u2024/x.txt",
		"/etc/passwd",
	} {
		rel, err := sandbox.Normalize(p)
		var pe *sandbox.PathError
		if errors.As(err, &pe) {
			fmt.Printf("%-30s rejected: %s\n", strconv.QuoteToASCII(p), string(pe.Rule))
			continue
		}
		fmt.Printf("%-30s -> %q\n", strconv.QuoteToASCII(p), rel)
	}
	// Output:
	// "/sandbox/notes/today.md"      -> "notes/today.md"
	// "/sandbox/"                    -> ""
	// "/sandbox/%2e%2e/x.txt"        -> "%2e%2e/x.txt"
	// "/sandbox/../etc/passwd"       rejected: dot_segment
	// "/sandbox/notes/"              rejected: trailing_slash
	// "/sandbox/\u2024\u2024/x.txt"  rejected: lookalike
	// "/etc/passwd"                  rejected: not_in_sandbox
}
