package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// boundName matches the names of settings that bound something: sizes,
// counts, rates, time-outs, quotas, slots, retention.
var boundName = regexp.MustCompile(`(^|_)(max|min|limit|rate|burst|timeout|quota|drift|retain|retention|ttl|memory|conns|workers|jobs|lease|tokens|retries|steps|wait|waiters)(_|$)`)

// Every setting whose name says it bounds something appears in the
// "setting" column of a table of docs/security.md — written `name`, or
// `[table] name` for one of a TOML table — so that the document's list of
// every limit, and what a peer gets over it, stays complete as settings
// are added.
func TestSecurityDocListsEveryLimit(t *testing.T) {
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := strings.Join(settingCells(string(doc)), "\n")
	var checked int
	for _, name := range tomlNames(reflect.TypeFor[Config](), "") {
		leaf := name[strings.LastIndex(name, " ")+1:]
		if !boundName.MatchString(leaf) {
			continue
		}
		checked++
		if !strings.Contains(listed, "`"+name+"`") {
			t.Errorf("setting %q bounds something (so its name says) but no table of docs/security.md lists it in its setting column as `%s`", name, name)
		}
	}
	if checked < 30 {
		t.Fatalf("only %d bounding settings found: the walk of Config is broken", checked)
	}
}

// tomlNames returns the TOML names of the settings of struct type typ:
// "name" at the top, "[table] name" inside a table.
func tomlNames(typ reflect.Type, table string) []string {
	var out []string
	for f := range typ.Fields() {
		tag := strings.Split(f.Tag.Get("toml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeFor[Duration]() {
			out = append(out, tomlNames(f.Type, "["+tag+"] ")...)
			continue
		}
		out = append(out, table+tag)
	}
	return out
}

// settingCells returns the cells of the column headed "setting" of every
// Markdown table of doc that has one.
func settingCells(doc string) []string {
	var out []string
	col := -1 // the setting column of the table being read, or -1
	header := true
	for _, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			col, header = -1, true
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		switch {
		case header:
			header = false
			for i, c := range cells {
				if strings.TrimSpace(c) == "setting" {
					col = i
				}
			}
		case col >= 0 && col < len(cells) && !strings.HasPrefix(strings.TrimSpace(cells[col]), "---"):
			out = append(out, cells[col])
		}
	}
	return out
}
