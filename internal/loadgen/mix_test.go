package loadgen

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestParseMix(t *testing.T) {
	f, err := os.Open("testdata/mix.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	cases := 0
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		in, want, ok := strings.Cut(line, " | ")
		if !ok {
			in, want, ok = strings.Cut(line, "| ") // an empty input
		}
		if !ok {
			t.Fatalf("testdata line %q: want INPUT | WANT", line)
		}
		cases++
		got, err := ParseMix(in)
		if msg, isErr := strings.CutPrefix(want, "error: "); isErr {
			if err == nil || !errors.Is(err, ErrMix) || !strings.Contains(err.Error(), msg) {
				t.Errorf("ParseMix(%q) = %v, %v; want an ErrMix naming %q", in, got, err, msg)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseMix(%q): %v", in, err)
			continue
		}
		if s := fmt.Sprintf("%d,%d,%d", got[OpSend], got[OpGet], got[OpStream]); s != want {
			t.Errorf("ParseMix(%q) = %s, want %s", in, s, want)
		}
	}
	if cases < 10 {
		t.Fatalf("only %d cases read", cases)
	}
}

// TestMixPick checks that each Op is drawn for exactly its weight's share
// of [0, total).
func TestMixPick(t *testing.T) {
	m := Mix{OpSend: 3, OpGet: 0, OpStream: 2}
	var got [numOps]int
	for r := range m.total() {
		got[m.pick(r)]++
	}
	if got != [numOps]int(m) {
		t.Fatalf("draws %v, want %v", got, m)
	}
}

func FuzzParseMix(f *testing.F) {
	for _, s := range []string{"send=70,get=25,stream=5", "get=1", "send=1,send=2", "", "stream=0,send=3", "x=1=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMix(s)
		if err != nil {
			if !errors.Is(err, ErrMix) {
				t.Fatalf("ParseMix(%q): %v is not an ErrMix", s, err)
			}
			return
		}
		if m.total() <= 0 {
			t.Fatalf("ParseMix(%q) = %v: no weight", s, m)
		}
		back, err := ParseMix(m.String())
		if err != nil || back != m {
			t.Fatalf("ParseMix(%q) = %v, whose String %q reads as %v, %v", s, m, m.String(), back, err)
		}
	})
}
