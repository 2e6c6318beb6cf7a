package scripts_test

import (
	"fmt"
	"testing"
	"unicode/utf8"

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
		{"Greek \u03BB and Cyrillic \u0436 apart", "Greek \u03BB and Cyrillic \u0436 apart"},
		{"\u03B1\u0430", "⟨U+03B1 Greek⟩⟨U+0430 Cyrillic⟩"},
		// A mathematical letter (script Common) among Latin ones.
		{"\U0001D429assword", "⟨U+1D429 Common⟩assword"},
		// Secrets with ѕ, е and с Cyrillic, r, t and the last s Latin: mixed.
		{"/sandbox/ѕесrеts/", "/sandbox/⟨U+0455 Cyrillic⟩⟨U+0435 Cyrillic⟩⟨U+0441 Cyrillic⟩r⟨U+0435 Cyrillic⟩ts/"},
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

// TestMarkWholeScript: a word wholly in one script other than Latin
// whose letters all imitate Latin ones (its UTS #39 skeleton is ASCII,
// accents aside) reads as a Latin word it is not, and is marked as a
// mixed one is; a word with one letter of its own that looks like no
// Latin letter (п, и, т, λ, Θ) is read as it is.
func TestMarkWholeScript(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// Cyrillic "paypal", its l a palochka (U+04CF).
		{"раураӏ", "⟨U+0440 Cyrillic⟩⟨U+0430 Cyrillic⟩⟨U+0443 Cyrillic⟩⟨U+0440 Cyrillic⟩⟨U+0430 Cyrillic⟩⟨U+04CF Cyrillic⟩"},
		// A whole component of a path: Cyrillic "scope", "exec".
		{"/sandbox/ѕсоре/run.sh", "/sandbox/⟨U+0455 Cyrillic⟩⟨U+0441 Cyrillic⟩⟨U+043E Cyrillic⟩⟨U+0440 Cyrillic⟩⟨U+0435 Cyrillic⟩/run.sh"},
		{"/sandbox/ехес.sh", "/sandbox/⟨U+0435 Cyrillic⟩⟨U+0445 Cyrillic⟩⟨U+0435 Cyrillic⟩⟨U+0441 Cyrillic⟩.sh"},
		// Greek capitals "API", "TOP"; one Greek α, one Cyrillic а.
		{"ΑΡΙ.md", "⟨U+0391 Greek⟩⟨U+03A1 Greek⟩⟨U+0399 Greek⟩.md"},
		{"ΤΟΡ", "⟨U+03A4 Greek⟩⟨U+039F Greek⟩⟨U+03A1 Greek⟩"},
		{"/sandbox/\u0430/config", "/sandbox/⟨U+0430 Cyrillic⟩/config"},
		{"Greek \u03B1", "Greek ⟨U+03B1 Greek⟩"},
		// Mathematical letters (script Common) reading "paypal".
		{"\U0001D429\U0001D41A\U0001D432\U0001D429\U0001D41A\U0001D425", "⟨U+1D429 Common⟩⟨U+1D41A Common⟩⟨U+1D432 Common⟩⟨U+1D429 Common⟩⟨U+1D41A Common⟩⟨U+1D425 Common⟩"},
		// An accent on a look-alike: ё reads as the Latin ë.
		{"сё", "⟨U+0441 Cyrillic⟩⟨U+0451 Cyrillic⟩"},
		// A digit of the word stays as it is; б reads as 6.
		{"б2", "⟨U+0431 Cyrillic⟩2"},
		// A Russian word can be wholly of look-alikes: сахар reads caxap.
		{"сахар", "⟨U+0441 Cyrillic⟩⟨U+0430 Cyrillic⟩⟨U+0445 Cyrillic⟩⟨U+0430 Cyrillic⟩⟨U+0440 Cyrillic⟩"},

		// Words of their own script: one letter that imitates no Latin
		// one is enough (п and и of привет, т of работе, к of Москва).
		{"привет", "привет"},
		{"/sandbox/работе/итоги.txt", "/sandbox/работе/итоги.txt"},
		{"Москва", "Москва"},
		{"Отчёт за май", "Отчёт за май"},
		{"λόγος", "λόγος"},
		// Θ is an O with a bar, no Latin letter.
		{"ΑΘΗΝΑ", "ΑΘΗΝΑ"},
		{"日本語のファイル.txt", "日本語のファイル.txt"},
		{"ハングル 한국어 ㅣ", "ハングル 한국어 ㅣ"},
		{"שלום", "שלום"},
		{"مرحبا", "مرحبا"},
		// Latin words, however accented, are not look-alikes of themselves.
		{"café résumé naïve Straße", "café résumé naïve Straße"},
		{"paypal 1l0O", "paypal 1l0O"},
		{"2026-05", "2026-05"},
	} {
		if got := scripts.Mark(c.in, scripts.Spelled); got != c.want {
			t.Errorf("Mark(%+q)\n got %+q\nwant %+q", c.in, got, c.want)
		}
		if got, want := scripts.Has(c.in), c.in != c.want; got != want {
			t.Errorf("Has(%+q) = %v, want %v", c.in, got, want)
		}
	}
}

// TestMarkLatin: a word of Latin letters is marked when a letter or
// mark of it (in its canonical decomposition) is one no living
// orthography uses, so that UTS #39 restricts it in identifiers: the
// Latin alpha, fullwidth forms, small capitals, ligatures, a stroke laid
// over a letter. So is a mark that hides on its letter (a dot above an i
// or a dotless ı, which then reads as i) or repeats the mark before it.
// Accented letters of the world's orthographies are left as they are,
// precomposed or not; so is the Turkish dotless ı, a letter of Turkish
// prose (kapı, ılık) however much it resembles an i.
func TestMarkLatin(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// The Latin alpha U+0251 (IPA), fullwidth letters, small capitals.
		{"p\u0251yp\u0251l", "p⟨U+0251 Latin⟩yp⟨U+0251 Latin⟩l"},
		{"/sandbox/\uff50\uff41\uff59\uff50\uff41\uff4c.txt", "/sandbox/⟨U+FF50 Latin⟩⟨U+FF41 Latin⟩⟨U+FF59 Latin⟩⟨U+FF50 Latin⟩⟨U+FF41 Latin⟩⟨U+FF4C Latin⟩.txt"},
		{"/sandbox/\u0280oot/key", "/sandbox/⟨U+0280 Latin⟩oot/key"},
		{"\u1d00\u1d05\u1d0d\u026a\u0274", "⟨U+1D00 Latin⟩⟨U+1D05 Latin⟩⟨U+1D0D Latin⟩⟨U+026A Latin⟩⟨U+0274 Latin⟩"},
		// A ligature, the long s, a click letter reading as l, a
		// superscript letter.
		{"\ufb01le.txt", "⟨U+FB01 Latin⟩le.txt"},
		{"\u017fecret", "⟨U+017F Latin⟩ecret"},
		{"\u01c0ogin", "⟨U+01C0 Latin⟩ogin"},
		{"key\u02e2", "key⟨U+02E2 Latin⟩"},
		// The other letters beyond ASCII of a marked word are spelled too.
		{"r\u00e9sum\u0251", "r⟨U+00E9 Latin⟩sum⟨U+0251 Latin⟩"},
		// A mark no orthography uses: a short stroke over the a.
		{"pa\u0335ypal", "pa⟨U+0335 Inherited⟩ypal"},
		// A mark that hides: the dot above merges with the i's own, and
		// makes a dotless ı an i again.
		{"i\u0307mportant", "i⟨U+0307 Inherited⟩mportant"},
		{"\u0131\u0307mportant", "⟨U+0131 Latin⟩⟨U+0307 Inherited⟩mportant"},
		// A mark repeated: the second acute lies on the first.
		{"caf\u00e9\u0301", "caf⟨U+00E9 Latin⟩⟨U+0301 Inherited⟩"},
		{"cafe\u0301\u0301", "cafe⟨U+0301 Inherited⟩⟨U+0301 Inherited⟩"},

		// Prose of the world's Latin orthographies, precomposed (NFC) or
		// decomposed (NFD), is left as it is.
		{"café naïve Straße STRAẞE cœur Ærø", "café naïve Straße STRAẞE cœur Ærø"},
		{"cafe\u0301 nai\u0308ve", "cafe\u0301 nai\u0308ve"},
		{"İstanbul I\u0307stanbul kapı ılık sığ açık ışık", "İstanbul I\u0307stanbul kapı ılık sığ açık ışık"},
		// The dotless ı is a Turkish letter: a word with it is not marked
		// though it may read as important.
		{"\u0131mportant", "\u0131mportant"},
		{"Łódź zażółć gęślą jaźń", "Łódź zażółć gęślą jaźń"},
		{"tiếng Việt, người, được", "tiếng Việt, người, được"},
		{"tie\u0302\u0301ng Vie\u0323\u0302t", "tie\u0302\u0301ng Vie\u0323\u0302t"},
		{"příliš žluťoučký kůň őrült Þórður", "příliš žluťoučký kůň őrült Þórður"},
		// Romanian with the comma below and the older cedilla, pinyin
		// tones, Azerbaijani, Ewe, Hausa, Yoruba, Sanskrit transliterated.
		{"țară ţară şi și", "țară ţară şi și"},
		{"lǜ nǚ", "lǜ nǚ"},
		{"Azərbaycan Eʋegbe ɗan ƙasa Ẹ̀kọ́ saṃskṛtam", "Azərbaycan Eʋegbe ɗan ƙasa Ẹ̀kọ́ saṃskṛtam"},
		// An accent an orthography uses is seen: páypal is not paypal.
		{"pa\u0301ypal", "pa\u0301ypal"},
	} {
		if got := scripts.Mark(c.in, scripts.Spelled); got != c.want {
			t.Errorf("Mark(%+q)\n got %+q\nwant %+q", c.in, got, c.want)
		}
		if got, want := scripts.Has(c.in), c.in != c.want; got != want {
			t.Errorf("Has(%+q) = %v, want %v", c.in, got, want)
		}
	}
}

// TestRestricted: Restricted judges words of Latin letters only; a word
// of another script, or of several, is LooksLatin's or Mixed's.
func TestRestricted(t *testing.T) {
	for _, c := range []struct {
		word string
		want bool
	}{
		{"p\u0251yp\u0251l", true},
		{"\uff50\uff41\uff59", true},
		{"i\u0307", true},
		{"caf\u00e9", false},
		{"kap\u0131", false},
		{"\u1e13ivha\u1e71", false}, // Venda ḓivhaṱ: d and t with a circumflex below
		{"paypal", false},
		{"\u0440\u0430\u0443\u0440\u0430\u04cf", false}, // Cyrillic
		{"p\u0430yp\u0251l", false},                     // mixed
		{"2026", false},
	} {
		if got := scripts.Restricted(c.word); got != c.want {
			t.Errorf("Restricted(%+q) = %v, want %v", c.word, got, c.want)
		}
	}
}

// FuzzMark: a text Mark leaves alone is one Has finds nothing in, and
// what Mark returns has nothing left to mark.
func FuzzMark(f *testing.F) {
	for _, s := range []string{
		"/sandbox/p\u0430ssword.txt", "раураӏ", "/sandbox/ѕсоре/", "привет",
		"ΑΘΗΝΑ ΤΟΡ", "сё б2", "\U0001D429assword", "日本語", "café", "",
		"p\u0251yp\u0251l", "\uff50\uff41\uff59", "\u0131\u0307", "cafe\u0301\u0301", "tie\u0302\u0301ng",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // the callers show a text's invalid bytes first
		}
		m := scripts.Mark(s, scripts.Spelled)
		if (m == s) == scripts.Has(s) {
			t.Fatalf("Mark(%+q) = %+q, Has = %v", s, m, scripts.Has(s))
		}
		if scripts.Has(m) {
			t.Fatalf("Mark(%+q) = %+q, which has a word to mark still", s, m)
		}
	})
}

func ExampleMark() {
	fmt.Println(scripts.Mark("/sandbox/p\u0430ssword.txt", scripts.Spelled))
	fmt.Println(scripts.Mark("/sandbox/\u0455\u0441\u043E\u0440\u0435/run.sh", scripts.Spelled))
	// Output:
	// /sandbox/p⟨U+0430 Cyrillic⟩ssword.txt
	// /sandbox/⟨U+0455 Cyrillic⟩⟨U+0441 Cyrillic⟩⟨U+043E Cyrillic⟩⟨U+0440 Cyrillic⟩⟨U+0435 Cyrillic⟩/run.sh
}

// TestMarkPrefix: Mark cut to a number of bytes, never inside a
// character or a mark, saying how much of the text it shows; a word the
// cut splits is marked as what is shown of it reads.
func TestMarkPrefix(t *testing.T) {
	const a = "⟨U+0430 Cyrillic⟩" // 21 bytes for the 2 of а
	for _, c := range []struct {
		in   string
		n    int
		want string
		used int
	}{
		{"plain text", 100, "plain text", 10},
		{"plain text", 5, "plain", 5},
		{"café", 4, "caf", 3}, // é's two bytes stay together
		{"p\u0430ss", 100, "p" + a + "ss", 5},
		{"p\u0430ss", 22, "p" + a, 3},
		{"p\u0430ss", 21, "p", 1}, // the marker does not fit: no part of it
		{"\u0430\u0430\u0430", 45, a + a, 4},
		{"ok \u0430\u0430", 3, "ok ", 3},
		{"сахарпривет", 100, "сахарпривет", 22},
		{"сахарпривет", 20, "сахарприве", 20},
		{"", 10, "", 0},
		{"abc", 0, "", 0},
	} {
		got, used := scripts.MarkPrefix(c.in, c.n, scripts.Spelled)
		if got != c.want || used != c.used {
			t.Errorf("MarkPrefix(%+q, %d) = %+q, %d; want %+q, %d", c.in, c.n, got, used, c.want, c.used)
		}
		if len(got) > c.n {
			t.Errorf("MarkPrefix(%+q, %d) takes %d bytes", c.in, c.n, len(got))
		}
		if whole := scripts.Mark(c.in, scripts.Spelled); used == len(c.in) && got != whole {
			t.Errorf("MarkPrefix(%+q, %d) = %+q, all of it, but Mark gives %+q", c.in, c.n, got, whole)
		}
	}
	// "сахарпривет" reads as itself; its first five letters alone, as caxap.
	star := func(rune) string { return "*" }
	if got, used := scripts.MarkPrefix("сахарпривет", 10, star); got != "*****" || used != 10 {
		t.Errorf("MarkPrefix(сахарпривет, 10) = %q, %d; want *****, 10", got, used)
	}
}

// TestShowPrefix: the characters show spells out are spelled out within
// the bound, a word's look-alike letters marked as MarkPrefix marks
// them, neither cut short; a byte that is not UTF-8 is shown as show
// says of utf8.RuneError.
func TestShowPrefix(t *testing.T) {
	show := func(r rune) string {
		switch r {
		case '\x01':
			return "<1>"
		case utf8.RuneError:
			return "?"
		}
		return ""
	}
	for _, c := range []struct {
		in   string
		n    int
		mark bool
		want string
		used int
	}{
		{"a\x01b", 100, false, "a<1>b", 3},
		{"a\x01b", 3, false, "a", 1},
		{"a\x01b", 4, false, "a<1>", 2},
		{"p\u0430ss\x01", 100, true, "p*ss<1>", 6},
		{"p\u0430ss\x01", 100, false, "p\u0430ss<1>", 6},
		{"x\xffy", 100, false, "x?y", 3},
	} {
		var mark func(rune) string
		if c.mark {
			mark = func(rune) string { return "*" }
		}
		got, used := scripts.ShowPrefix(c.in, c.n, mark, show)
		if got != c.want || used != c.used {
			t.Errorf("ShowPrefix(%+q, %d, %v) = %+q, %d; want %+q, %d", c.in, c.n, c.mark, got, used, c.want, c.used)
		}
	}
}
