package suggest

import "testing"

func TestDidYouMean(t *testing.T) {
	names := []string{"run", "send", "stream", "approve", "deny", "data-dir", "database", "log_level", "agent.max_steps"}
	for _, tc := range []struct{ got, prefix, want string }{
		{"rnu", "", " (did you mean run?)"},               // swapped neighbours
		{"aprove", "", " (did you mean approve?)"},        // a letter missing
		{"sned", "", " (did you mean send?)"},             // swapped
		{"data-dri", "--", " (did you mean --data-dir?)"}, // flag prefix
		{"datab", "--", " (did you mean --database?)"},    // a prefix of three letters or more
		{"log_levle", "", " (did you mean log_level?)"},
		{"agent.max_stepz", "", " (did you mean agent.max_steps?)"},
		{"xyzzy", "", ""}, // nothing close
		{"r", "", ""},     // too short to guess
		{"", "", ""},
	} {
		if got := DidYouMean(tc.got, names, tc.prefix); got != tc.want {
			t.Errorf("DidYouMean(%q) = %q, want %q", tc.got, got, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"run", "run", 0},
		{"rnu", "run", 1}, {"kitten", "sitting", 3}, {"ca", "abc", 3},
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := editDistance(tc.b, tc.a); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d (symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

func FuzzDidYouMean(f *testing.F) {
	f.Add("rnu", "run")
	f.Fuzz(func(t *testing.T, got, name string) {
		s := DidYouMean(got, []string{name}, "--")
		if s != "" && s != " (did you mean --"+name+"?)" {
			t.Fatalf("DidYouMean(%q, [%q]) = %q", got, name, s)
		}
		if d := editDistance(got, name); d < 0 || d > max(len(got), len(name)) {
			t.Fatalf("editDistance(%q, %q) = %d", got, name, d)
		}
	})
}
