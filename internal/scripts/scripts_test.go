package scripts_test

import (
	"fmt"
	"testing"

	"github.com/snapnode/snapnode/internal/scripts"
)

// TestMark: the words that mix scripts, and only those, have their
// letters beyond ASCII spelled out.
func TestMark(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/sandbox/p\u0430ssword.txt", "/sandbox/p⟨U+0430 Cyrillic⟩ssword.txt"},
		{"c\u03BFnfig/main.go", "c⟨U+03BF Greek⟩nfig/main.go"},
		// One script a word: Cyrillic, Greek, Japanese, Latin beyond ASCII.
		{"/sandbox/отчёты/итоги.txt", "/sandbox/отчёты/итоги.txt"},
		{"λόγος-2.md", "λόγος-2.md"},
		{"日本語のファイル.txt", "日本語のファイル.txt"},
		{"café_résumé.txt", "café_résumé.txt"},
		// Digits and punctuation belong to no script.
		{"итоги2026", "итоги2026"},
		{"итоги_2026-05.txt", "итоги_2026-05.txt"},
		// Each word alone: the Latin é of a mixed word is spelled too.
		{"résum\u0435 ok", "r⟨U+00E9 Latin⟩sum⟨U+0435 Cyrillic⟩ ok"},
		{"Greek \u03B1 and Cyrillic \u0430 apart", "Greek \u03B1 and Cyrillic \u0430 apart"},
		{"\u03B1\u0430", "⟨U+03B1 Greek⟩⟨U+0430 Cyrillic⟩"},
		// A mathematical letter (script Common) among Latin ones.
		{"\U0001D429assword", "⟨U+1D429 Common⟩assword"},
		{"", ""},
	} {
		if got := scripts.Mark(c.in, scripts.Spelled); got != c.want {
			t.Errorf("Mark(%+q)\n got %+q\nwant %+q", c.in, got, c.want)
		}
		if got, want := scripts.Has(c.in), c.in != c.want; got != want {
			t.Errorf("Has(%+q) = %v, want %v", c.in, got, want)
		}
	}
}

func ExampleMark() {
	fmt.Println(scripts.Mark("/sandbox/p\u0430ssword.txt", scripts.Spelled))
	// Output: /sandbox/p⟨U+0430 Cyrillic⟩ssword.txt
}
