package scripts_test

import (
	"strings"
	"testing"
	"unicode"

	"github.com/snapnode/snapnode/internal/scripts"
)

// benchTexts are what Has and Mark are given: a diff's file headers and
// a requester's words, in ASCII, in Russian prose, in accented Latin
// prose (French, German, Polish, Turkish, Vietnamese), and with
// look-alikes.
var benchTexts = []struct{ name, text string }{
	{"ascii", strings.Repeat("--- /sandbox/notes/2026-11-27 meeting.md\n+++ /sandbox/notes/2026-11-27 meeting.md\n", 8)},
	{"russian", strings.Repeat("Итоги встречи: перенести отчёт в папку архива и обновить список задач. ", 8)},
	{"latin", strings.Repeat("Le café est fermé; die Straße ist naß. Łódź, İstanbul, kapı açık: tiếng Việt được. ", 8)},
	{"lookalike", strings.Repeat("--- /sandbox/p\u0430ssword.txt\n+++ /sandbox/\u0455\u0441\u043e\u0440\u0435/run.md\n", 8)},
}

// BenchmarkHas times Has, which the console and `snapnode held` call on
// every diff and name they show, beside a baseline in the same run: one
// pass over the same text's runes asking unicode.IsLetter of each (the
// least a look at every letter costs).
func BenchmarkHas(b *testing.B) {
	for _, tc := range benchTexts {
		b.Run(tc.name+"/has", func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			for b.Loop() {
				scripts.Has(tc.text)
			}
		})
		b.Run(tc.name+"/baseline", func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			n := 0
			for b.Loop() {
				for _, r := range tc.text {
					if unicode.IsLetter(r) {
						n++
					}
				}
			}
			_ = n
		})
	}
}

// BenchmarkMark times Mark with Spelled on the same texts.
func BenchmarkMark(b *testing.B) {
	for _, tc := range benchTexts {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(tc.text)))
			for b.Loop() {
				scripts.Mark(tc.text, scripts.Spelled)
			}
		})
	}
}
