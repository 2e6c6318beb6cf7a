// Package suggest finds, among the names a program knows (commands,
// flags, settings), the one a mistyped name most likely meant:
//
//	suggest.DidYouMean("rnu", []string{"run", "send"}, "")      // " (did you mean run?)"
//	suggest.DidYouMean("data-dri", flagNames, "--")             // " (did you mean --data-dir?)"
//	suggest.DidYouMean("xyzzy", []string{"run", "send"}, "")    // ""
package suggest
