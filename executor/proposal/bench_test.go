package proposal_test

import (
	stdjson "encoding/json"
	"testing"

	"github.com/snapnode/snapnode/executor/proposal"
)

var benchWrite = []byte(`{"schema_version":"1.0.1","id":"3f2b8c1e-5d4a-4e6f-9a7b-1c2d3e4f5a6b","reasoning":"I need to save the log","action":"WRITE_FILE","args":{"path":"/sandbox/logs/2026/app.txt","content":"Hello World! This is one line of a log file that the agent wants to keep."}}`)

// BenchmarkParse measures the whole validation of a WRITE_FILE proposal
// beside the floor: encoding/json decoding the same bytes into a map.
func BenchmarkParse(b *testing.B) {
	b.Run("baseline-json.Unmarshal-map", func(b *testing.B) {
		b.SetBytes(int64(len(benchWrite)))
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := stdjson.Unmarshal(benchWrite, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parse-write_file", func(b *testing.B) {
		b.SetBytes(int64(len(benchWrite)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := proposal.Parse(benchWrite); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Parse-refused-path", func(b *testing.B) {
		bad := []byte(`{"schema_version":"1.0.1","id":"3f2b8c1e-5d4a-4e6f-9a7b-1c2d3e4f5a6b","reasoning":"r","action":"WRITE_FILE","args":{"path":"/sandbox/../etc/cron.txt","content":"x"}}`)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := proposal.Parse(bad); err == nil {
				b.Fatal("accepted")
			}
		}
	})
}

// BenchmarkDescribe measures deriving the descriptor of a parsed proposal.
func BenchmarkDescribe(b *testing.B) {
	p, err := proposal.Parse(benchWrite)
	if err != nil {
		b.Fatal(err)
	}
	d := fixedDefaults()
	b.ReportAllocs()
	for b.Loop() {
		_ = proposal.Describe(p, d)
	}
}

// BenchmarkParseDescriptor measures peer descriptors beside encoding/json
// decoding the same bytes: a leaf, a composite of three, and the costliest
// wildcard load a descriptor may carry (200 patterns, under the budget).
func BenchmarkParseDescriptor(b *testing.B) {
	for _, name := range []string{"write", "composite", "wildcards"} {
		var raw []byte
		if name == "wildcards" {
			raw = wildcardHeavy(b, 200)
		} else {
			var err error
			if raw, err = readBase(name); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(name+"/baseline-json.Unmarshal-map", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				var m map[string]any
				if err := stdjson.Unmarshal(raw, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/ParseDescriptor", func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := proposal.ParseDescriptor(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
