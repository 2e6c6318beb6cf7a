package policy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	cedar "github.com/cedar-policy/cedar-go"

	"github.com/snapnode/snapnode/executor/policy"
)

// hundredRules is an operator policy of 100 rules: 90 permits, one per
// folder, some with a size condition or @confirm, and 10 forbids.
func hundredRules() string {
	var b strings.Builder
	for i := range 90 {
		switch i % 3 {
		case 0:
			fmt.Fprintf(&b, "@id(\"p%d\")\npermit (principal, action in Action::\"write\", resource in Path::\"/sandbox/dir%d/\");\n", i, i)
		case 1:
			fmt.Fprintf(&b, "@id(\"p%d\")\npermit (principal, action == Action::\"WRITE_FILE\", resource in Path::\"/sandbox/dir%d/\") when { context.size < %d };\n", i, i, 1000*i)
		case 2:
			fmt.Fprintf(&b, "@id(\"p%d\") @confirm(\"dir%d is shared\")\npermit (principal in Role::\"operator\", action, resource in Path::\"/sandbox/dir%d/\");\n", i, i, i)
		}
	}
	for i := range 10 {
		fmt.Fprintf(&b, "@id(\"f%d\")\nforbid (principal, action, resource in Path::\"/sandbox/dir%d/secret/\") unless { context.riskLevel < 2 };\n", i, i*9)
	}
	return b.String()
}

var benchReq = policy.Request{Principal: "bc1pbenchagent", Action: policy.ActionWriteFile,
	Paths: []string{"/sandbox/dir57/notes/today.md"}, Risk: policy.RiskMedium, Size: 512, RollbackSupported: true}

// BenchmarkDecide measures a WRITE_FILE decision with the default policy
// and with a 100-rule policy, beside two baselines in the same run: cedar's
// raw Authorize on the same 100 rules (entities prepared once), and a map
// look-up, the least a decision could cost.
func BenchmarkDecide(b *testing.B) {
	ctx := context.Background()
	src := hundredRules()
	hundred, err := policy.Parse("hundred.cedar", []byte(src))
	if err != nil {
		b.Fatal(err)
	}
	if hundred.Len() != 100 {
		b.Fatalf("%d rules", hundred.Len())
	}
	def := policy.Default()
	if d := def.Decide(ctx, benchReq); d.Effect != policy.Permit {
		b.Fatalf("default: %+v", d)
	}
	if d := hundred.Decide(ctx, benchReq); d.Effect != policy.Permit {
		b.Fatalf("100 rules: %+v", d)
	}

	b.Run("default", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			def.Decide(ctx, benchReq)
		}
	})
	b.Run("100-rules", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			hundred.Decide(ctx, benchReq)
		}
	})
	b.Run("host-deny", func(b *testing.B) {
		r := benchReq
		r.Paths = []string{"/sandbox/../etc/passwd"}
		b.ReportAllocs()
		for b.Loop() {
			hundred.Decide(ctx, r)
		}
	})
	b.Run("rename-100-rules", func(b *testing.B) {
		r := benchReq
		r.Action, r.Risk = policy.ActionRenameFile, policy.RiskHigh
		r.Paths = []string{"/sandbox/dir57/a.md", "/sandbox/dir57/b.md"}
		b.ReportAllocs()
		for b.Loop() {
			hundred.Decide(ctx, r)
		}
	})

	for _, hierarchy := range []bool{false, true} {
		name := "baseline-cedar-authorize-100-rules-flat"
		if hierarchy {
			name = "baseline-cedar-authorize-100-rules-hierarchy"
		}
		b.Run(name, func(b *testing.B) { rawCedar(b, src, hierarchy) })
	}
	b.Run("baseline-map-lookup", func(b *testing.B) {
		allowed := map[string]bool{}
		for i := range 100 {
			allowed[fmt.Sprintf("WRITE_FILE /sandbox/dir%d/", i)] = true
		}
		key := "WRITE_FILE /sandbox/dir57/"
		b.ReportAllocs()
		for b.Loop() {
			if !allowed[key] {
				b.Fatal("not allowed")
			}
		}
	})
}

// rawCedar authorizes the benchmark request with cedar alone, on entities
// built once: the resource with all its directories as parents and, with
// hierarchy, an entity for each directory naming its parent, as the engine
// provides (flat: the directories are absent, so a failing `in` stops at
// once).
func rawCedar(b *testing.B, src string, hierarchy bool) {
	ps, err := cedar.NewPolicySetFromBytes("hundred.cedar", []byte(src))
	if err != nil {
		b.Fatal(err)
	}
	path := func(s string) cedar.EntityUID { return cedar.NewEntityUID("Path", cedar.String(s)) }
	write := cedar.NewEntityUID("Action", "WRITE_FILE")
	resource := path(benchReq.Paths[0])
	dirs := []string{"/", "/sandbox/", "/sandbox/dir57/", "/sandbox/dir57/notes/", benchReq.Paths[0] + "/"}
	parents := make([]cedar.EntityUID, len(dirs))
	for i, d := range dirs {
		parents[i] = path(d)
	}
	entities := cedar.EntityMap{
		write:    {UID: write, Parents: cedar.NewEntityUIDSet(cedar.NewEntityUID("Action", "write"))},
		resource: {UID: resource, Parents: cedar.NewEntityUIDSet(parents...)},
	}
	if hierarchy {
		for i, d := range dirs {
			e := cedar.Entity{UID: path(d)}
			if i > 0 && i < 4 {
				e.Parents = cedar.NewEntityUIDSet(path(dirs[i-1]))
			} else if i == 4 {
				e.Parents = cedar.NewEntityUIDSet(path(dirs[3]))
			}
			entities[e.UID] = e
		}
	}
	req := cedar.Request{
		Principal: cedar.NewEntityUID("Agent", "bc1pbenchagent"),
		Action:    write,
		Resource:  resource,
		Context: cedar.NewRecord(cedar.RecordMap{"risk": cedar.String("MEDIUM"), "riskLevel": cedar.Long(2),
			"size": cedar.Long(512), "rollbackSupported": cedar.True, "recentlyRolledBack": cedar.False}),
	}
	if d, _ := cedar.Authorize(ps, entities, req); d != cedar.Allow {
		b.Fatal("raw cedar denies")
	}
	b.ReportAllocs()
	for b.Loop() {
		cedar.Authorize(ps, entities, req)
	}
}

func BenchmarkParse(b *testing.B) {
	src := []byte(hundredRules())
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := policy.Parse("hundred.cedar", src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkExplain(b *testing.B) {
	e := policy.Default()
	b.ReportAllocs()
	for b.Loop() {
		e.Explain(benchReq)
	}
}
