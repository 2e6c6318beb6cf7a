package console_test

import (
	"context"
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/proposals"
)

// invisibleDescriptorSource holds an action whose descriptor is a long
// run of zero-width spaces, each shown as ⟨U+200B⟩ (12 bytes for 3).
type invisibleDescriptorSource struct{ fakeSource }

func (s invisibleDescriptorSource) Held(ctx context.Context, taskID string) ([]executor.Pending, error) {
	list, err := s.fakeSource.Held(ctx, taskID)
	for i := range list {
		list[i].Data = []byte(`{"intent_summary":"` + strings.Repeat("\u200B", console.MaxPartText) + `"}`)
	}
	return list, err
}

func (s invisibleDescriptorSource) HeldPage(ctx context.Context, q proposals.HeldQuery) (*proposals.HeldPage, error) {
	list, err := s.Held(ctx, q.Task)
	return heldPage(list, q), err
}

var markerRE = regexp.MustCompile(`⟨U\+[0-9A-F]{4,6}⟩`)

// A held action's descriptor is cut at MaxPartText before its invisible
// characters are shown, not after: the cut of the text as shown fell
// inside a ⟨U+200B⟩, leaving "⟨U+20" on the page, a marker of no
// character.
func TestHeldDescriptorCutKeepsMarkersWhole(t *testing.T) {
	r := newRig(t, func(c *console.Config) { c.Source = invisibleDescriptorSource{} })
	ck := r.login(t)
	w := r.do("GET", at(ck, "tasks/t1"), nil, ck, nil)
	if w.Code != 200 {
		t.Fatalf("task page: %d\n%s", w.Code, w.Body)
	}
	var found bool
	for _, m := range preRE.FindAllStringSubmatch(w.Body.String(), -1) {
		shown := html.UnescapeString(m[1])
		if !strings.Contains(shown, "intent_summary") {
			continue
		}
		found = true
		if !strings.Contains(shown, "more bytes not shown") {
			t.Errorf("the descriptor is not cut: %d bytes", len(shown))
		}
		if rest := markerRE.ReplaceAllString(shown, ""); strings.Contains(rest, "⟨") || strings.Contains(rest, "U+") {
			i := max(0, strings.Index(rest, "⟨"))
			t.Errorf("the descriptor shows a marker cut short: %q", rest[i:min(len(rest), i+60)])
		}
	}
	if !found {
		t.Fatal("no descriptor on the page")
	}
}
