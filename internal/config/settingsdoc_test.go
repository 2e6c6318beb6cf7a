package config

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docRow is one row of a settings table of the docs: its TOML keys (as
// fileKeys names them, "agent.max_steps"), the flags and variables it
// names anywhere, its default cell and its range cell.
type docRow struct {
	keys, flags, vars []string
	deflt, rng, line  string
	// doc is the document: "operator.md", "agent.md".
	doc string
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	docFlag    = regexp.MustCompile(`^--([a-z0-9-]+)`)
	docVar     = regexp.MustCompile(`^(SNAPNODE_[A-Z0-9_]+|…(_[A-Z0-9_]+))`)
	docKey     = regexp.MustCompile(`^(\[([a-z]+)\] )?([a-z_]+)$`)
)

// settingsTable returns the rows of the first Markdown table after the
// heading of the document name: keyCol is the column of the TOML keys,
// defaultCol that of the default, rangeCol that of the range; table is
// the keys' TOML table ("agent.") when the column names none.
func settingsTable(t *testing.T, name, heading string, keyCol, defaultCol, rangeCol int, table string) []docRow {
	t.Helper()
	_, after, ok := strings.Cut(readDoc(t, name), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("no heading %q", heading)
	}
	var rows []docRow
	header := true
	for _, line := range strings.Split(after, "\n") {
		if !strings.HasPrefix(line, "|") {
			if !header {
				break
			}
			continue
		}
		if header || strings.HasPrefix(line, "|---") { // the header
			header = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) <= max(keyCol, defaultCol, rangeCol) {
			t.Fatalf("row with %d cells: %s", len(cells), line)
		}
		r := docRow{deflt: strings.TrimSpace(cells[defaultCol]), rng: strings.TrimSpace(cells[rangeCol]), line: line, doc: name}
		prefix := table
		for _, m := range backticked.FindAllStringSubmatch(cells[keyCol], -1) {
			k := docKey.FindStringSubmatch(m[1])
			if k == nil {
				continue
			}
			if k[2] != "" {
				prefix = k[2] + "."
			}
			r.keys = append(r.keys, prefix+k[3])
		}
		var last string
		for _, m := range backticked.FindAllStringSubmatch(line, -1) {
			if f := docFlag.FindStringSubmatch(m[1]); f != nil {
				r.flags = append(r.flags, f[1])
			}
			if v := docVar.FindStringSubmatch(m[1]); v != nil {
				name := v[1]
				if v[2] != "" { // …_COMPLETION: the last one's with another end
					name = last[:strings.LastIndex(last, "_")] + v[2]
				}
				r.vars, last = append(r.vars, name), name
			}
		}
		// A flag column's flags are written --name ARG, unquoted.
		for _, f := range regexp.MustCompile(`--([a-z0-9-]+)`).FindAllStringSubmatch(cells[0], -1) {
			r.flags = append(r.flags, f[1])
		}
		rows = append(rows, r)
	}
	if len(rows) < 10 {
		t.Fatalf("%q: only %d rows read", heading, len(rows))
	}
	return rows
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docRows returns the rows of operator.md's settings reference and of
// agent.md's [agent] table.
func docRows(t *testing.T) []docRow {
	rows := settingsTable(t, "operator.md", "## Settings", 2, 4, 3, "")
	return append(rows, settingsTable(t, "agent.md", "## Settings", 0, 2, 3, "agent.")...)
}

// Every setting of the file, every flag of `snapnode run` and every
// SNAPNODE_* variable the node reads is in a row of operator.md's
// settings table (or, for [agent], of agent.md's), and every key, flag
// and variable those rows name exists: the reference an operator reads
// is the list of what the node takes.
func TestSettingsDocMatchesCode(t *testing.T) {
	rows := docRows(t)
	docKeys, docFlags, docVars := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		for _, k := range r.keys {
			docKeys[k] = true
		}
		for _, f := range r.flags {
			docFlags[f] = true
		}
		for _, v := range r.vars {
			docVars[v] = true
		}
	}
	// The card's own fields are shown by the example under the table;
	// nostr_relays has its row.
	cardText := readDoc(t, "operator.md")
	keys := fileKeys(reflect.TypeFor[Config](), "")
	for _, k := range keys {
		if c, ok := strings.CutPrefix(k, "card."); ok && c != "nostr_relays" {
			if !strings.Contains(cardText, "\n"+c+" = ") && !strings.Contains(cardText, "[card] "+c) && !strings.Contains(cardText, "[[card."+c+"]]") {
				t.Errorf("the card's %q is neither in operator.md's example nor named `[card] %s`", k, c)
			}
			continue
		}
		if !docKeys[k] {
			t.Errorf("setting %q is in no row of the settings tables", k)
		}
	}
	for k := range docKeys {
		if !slices.Contains(keys, k) {
			t.Errorf("the docs' settings tables name %q, which is no setting", k)
		}
	}

	c := Default()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	Flags(fs, &c)
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name != "config" && !docFlags[f.Name] {
			t.Errorf("flag --%s is in no row of the settings tables", f.Name)
		}
	})
	for f := range docFlags {
		if fs.Lookup(f) == nil {
			t.Errorf("the settings tables name --%s, which `snapnode run` does not take", f)
		}
	}
	vars := map[string]bool{"SNAPNODE_KEY": true, LLMAPIKeyEnv: true} // the secrets themselves
	for _, s := range settings {
		vars[s.env] = true
		if !docVars[s.env] {
			t.Errorf("variable %s is in no row of the settings tables", s.env)
		}
	}
	for v := range docVars {
		if !vars[v] {
			t.Errorf("the settings tables name %s, which the node does not read", v)
		}
	}
}

// Each row's default cell says the default of each setting it names
// that has a number or a duration for default: 262144 (or 262,144),
// 60s (or 1m), 0.2. (A 0 in a row of several settings may be said as
// what it means.)
func TestSettingsDocDefaults(t *testing.T) {
	def := reflect.ValueOf(Default())
	for _, r := range docRows(t) {
		if r.deflt == "" {
			t.Errorf("no default: %s", r.line)
		}
		for _, k := range r.keys {
			v := def
			for _, part := range strings.Split(k, ".") {
				if v = fieldByTag(v, part); !v.IsValid() {
					break // TestSettingsDocMatchesCode names it
				}
			}
			if !v.IsValid() {
				continue
			}
			var forms []string
			switch x := v.Interface().(type) {
			case int, int64:
				n := v.Int()
				forms = []string{strconv.FormatInt(n, 10), thousands(n)}
			case float64:
				forms = []string{strconv.FormatFloat(x, 'f', -1, 64)}
			case Duration:
				forms = durationForms(x.Duration)
			default:
				continue
			}
			if v.IsZero() && len(r.keys) > 1 {
				continue // "half of them (2)": a row of several says what 0 means
			}
			found := false
			for _, f := range forms {
				if regexp.MustCompile(`(^|[^0-9.,])` + regexp.QuoteMeta(f) + `([^0-9]|$)`).MatchString(r.deflt) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: default %v, the docs say %q", k, forms, r.deflt)
			}
		}
	}
}

// Each row's range cell states the range the node holds each of its
// settings to, as the bounds table words it (bound.rule): "1024…10485760
// bytes", "at least 1", "0…`max_streams`" (a setting named in it written
// `name`, in agent.md without "agent."). A row of several settings says
// "at least 1 each" when their ranges are the same, else each range after
// its setting's name: "`http_rate` 0 or more, `http_burst` at least 1".
// An [agent] setting's range is in agent.md's row (operator.md's rows of
// [agent] settings send the reader there); a row none of whose settings
// is bounded says "—".
func TestSettingsDocRanges(t *testing.T) {
	rule := map[string]string{}
	for _, b := range bounds {
		rule[b.key] = b.rule(nil)
	}
	home := func(key string) string {
		if strings.HasPrefix(key, "agent.") {
			return "agent.md"
		}
		return "operator.md"
	}
	rows := docRows(t)
	for _, r := range rows {
		bounded := slices.ContainsFunc(r.keys, func(k string) bool { _, ok := rule[k]; return ok })
		if !bounded && r.rng != "—" {
			t.Errorf("%s: a row of no bounded setting says the range %q: %s", r.doc, r.rng, r.line)
		}
	}
	for _, b := range bounds {
		found := false
		for _, r := range rows {
			if r.doc != home(b.key) || !slices.Contains(r.keys, b.key) {
				continue
			}
			found = true
			phrase := rule[b.key]
			if r.doc == "agent.md" {
				phrase = strings.ReplaceAll(phrase, "agent.", "")
			}
			for _, k := range r.keys {
				if _, ok := rule[k]; ok && rule[k] != rule[b.key] {
					phrase = b.key[strings.LastIndex(b.key, ".")+1:] + " " + phrase
					break
				}
			}
			cell := strings.ReplaceAll(r.rng, "`", "")
			if !regexp.MustCompile(`(^|, )` + regexp.QuoteMeta(phrase) + `($|,| each$)`).MatchString(cell) {
				t.Errorf("%s: %s's row says the range %q, want %q in it", b.key, r.doc, r.rng, phrase)
			}
		}
		if !found {
			t.Errorf("%s: no row of %s", b.key, home(b.key))
		}
	}
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// durationForms are the ways the docs write d: 2m0s as 2m, 120s or
// "2 minutes".
func durationForms(d time.Duration) []string {
	s := strings.TrimSuffix(strings.TrimSuffix(d.String(), "0s"), "0m")
	forms := []string{d.String(), s, fmt.Sprintf("%ds", int64(d/time.Second))}
	if d%time.Minute == 0 {
		forms = append(forms, fmt.Sprintf("%d minutes", int64(d/time.Minute)))
	}
	if d == 0 {
		forms = append(forms, "0")
	}
	return forms
}
