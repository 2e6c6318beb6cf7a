package suggest

import "strings"

// DidYouMean returns " (did you mean PREFIX+NAME?)" for the name among
// names closest to got, when one is close enough to be a typo (an edit
// distance of at most a third of its length, at least 1, or a prefix of
// three letters or more), else "".
func DidYouMean(got string, names []string, prefix string) string {
	best, bestD := "", max(1, len(got)/3)+1
	for _, n := range names {
		d := editDistance(got, n)
		if strings.HasPrefix(n, got) && len(got) >= 3 {
			d = min(d, 1)
		}
		if d < bestD || (d == bestD && n < best) {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return " (did you mean " + prefix + best + "?)"
}

// editDistance is the optimal-string-alignment distance between a and b,
// in bytes: insertions, deletions, substitutions and swaps of neighbours
// (rnu → run) count one each. Hand-written: a dozen lines, for names of a
// few bytes, do not call for a dependency.
func editDistance(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
