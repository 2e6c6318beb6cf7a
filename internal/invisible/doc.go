// Package invisible finds the characters a reader cannot see, or that
// change how the text around them reads (bidi overrides and isolates,
// zero-width characters, tags, private-use code points, variation
// selectors, line and paragraph separators, controls), and writes them in
// JSON text, or in plain text, as \u escapes, so that a file name, a model's answer or a
// peer's text cannot reorder or hide what a model is told or an operator
// reads.
//
//	b, _ := json.Marshal(observation)
//	prompt := invisible.EscapeJSON(b) // the same JSON, nothing hidden
//
//	w := invisible.NewWriter(os.Stdout) // every JSON line printed through it
//
//	shown := invisible.EscapeText(fileText) // plain text: lines and tabs kept
package invisible
