package policy_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/snapnode/snapnode/executor/policy"
)

// The built-in policy lets any agent write a small file, and asks an
// operator to confirm a delete.
func ExampleEngine_Decide() {
	engine := policy.Default()
	ctx := context.Background()

	d := engine.Decide(ctx, policy.Request{
		Principal:         "bc1pexampleagent",
		Action:            policy.ActionWriteFile,
		Paths:             []string{"/sandbox/notes/today.md"},
		Risk:              policy.RiskMedium,
		Size:              12,
		RollbackSupported: true,
	})
	fmt.Println(d.Effect, d.DecidedBy)

	d = engine.Decide(ctx, policy.Request{
		Principal:         "bc1pexampleagent",
		Action:            policy.ActionDeleteFile,
		Paths:             []string{"/sandbox/notes/today.md"},
		Risk:              policy.RiskHigh,
		RollbackSupported: true,
	})
	fmt.Println(d.Effect, d.DecidedBy, d.Sandbox)
	// Output:
	// permit [write]
	// confirm [destructive host:high-risk-sandbox] true
}

// An operator's policy: agents write under docs/ only, operators anything
// with confirmation, and nobody touches secrets/.
func ExampleParse() {
	engine, err := policy.Parse("policy.cedar", []byte(`
@id("docs")
permit (principal, action in Action::"write", resource in Path::"/sandbox/docs/");

@id("operators") @confirm("operator changes are confirmed")
permit (principal in Role::"operator", action, resource);

@id("no-secrets") @reason("secrets/ is off limits")
forbid (principal, action, resource in Path::"/sandbox/secrets/");
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	write := func(operator bool, path string) {
		d := engine.Decide(context.Background(), policy.Request{
			Principal: "bc1pexampleagent", Operator: operator, Action: policy.ActionWriteFile,
			Paths: []string{path}, Risk: policy.RiskMedium, Size: 5, RollbackSupported: true,
		})
		fmt.Printf("%-22s operator=%-5v %s %v\n", path, operator, d.Effect, d.DecidedBy)
	}
	write(false, "/sandbox/docs/a.md")
	write(false, "/sandbox/a.md")
	write(true, "/sandbox/a.md")
	write(true, "/sandbox/secrets/a.md")
	// Output:
	// /sandbox/docs/a.md     operator=false permit [docs]
	// /sandbox/a.md          operator=false deny [deny-by-default]
	// /sandbox/a.md          operator=true  confirm [operators]
	// /sandbox/secrets/a.md  operator=true  deny [no-secrets]
}

// No policy overrides the host rules: even "permit everything" does not
// let a path leave /sandbox/.
func ExampleEngine_Decide_hostRules() {
	engine, _ := policy.Parse("everything.cedar", []byte(`permit (principal, action, resource);`))
	d := engine.Decide(context.Background(), policy.Request{
		Principal: "bc1pexampleagent", Action: policy.ActionWriteFile,
		Paths: []string{"/sandbox/../etc/passwd"}, Risk: policy.RiskMedium, RollbackSupported: true,
	})
	fmt.Println(d.Effect)
	fmt.Println(d.Reasons[0])
	// Output:
	// deny
	// host:sandbox-only: outside /sandbox/: "/sandbox/../etc/passwd"
}

// Errors name the file, line and column.
func ExampleParse_error() {
	_, err := policy.Parse("policy.cedar", []byte("permit (principal, action, resource)\nwhen { context.size < };\n"))
	var pe *policy.ParseError
	fmt.Println(errors.As(err, &pe), errors.Is(err, policy.ErrInvalidPolicy))
	fmt.Println(err)
	// Output:
	// true true
	// policy.cedar:2:23: invalid primary
}

func ExampleEngine_Explain() {
	engine, _ := policy.Parse("policy.cedar", []byte(`
@id("read") permit (principal, action == Action::"READ_FILE", resource);
`))
	fmt.Print(engine.Explain(policy.Request{
		Principal: "bc1pexampleagent", Action: "read_file", Paths: []string{"/sandbox/a.txt"},
		Risk: "LOW", RollbackSupported: true,
	}))
	// Output:
	// request:  Agent::"bc1pexampleagent" READ_FILE "/sandbox/a.txt"
	//           risk LOW, size 0, rollback supported, not a repeat after a rollback
	// policy:   policy.cedar (version 7cff2f698e58d1bf, 1 policies)
	// host rules (checked first; no policy overrides them):
	//   pass     host:well-formed         request is well formed
	//   pass     host:sandbox-only        every path is inside /sandbox/
	//   pass     host:rollback-required   rollback is supported
	//   pass     host:critical-blocked    risk is not CRITICAL
	//   pass     host:high-risk-sandbox   risk below HIGH: sandbox not mandatory
	//   pass     host:rollback-cooldown   not a repeat after a rollback
	// cedar policy:
	//   on Path::"/sandbox/a.txt": permit
	//     permit   read at policy.cedar:2:1
	// decision: PERMIT
	//   - policy "read" at policy.cedar:2:1 permits READ_FILE on /sandbox/a.txt
}

// A Holder keeps the policy in force; a reload that fails keeps the old one.
func ExampleHolder() {
	h := policy.NewHolder(policy.Default())
	strict, _ := policy.Parse("strict.cedar", []byte(`@id("none") forbid (principal, action, resource);`))
	old := h.Swap(strict)
	fmt.Println(old.Name(), "->", h.Engine().Name())

	d := h.Decide(context.Background(), policy.Request{
		Principal: "bc1pexampleagent", Action: policy.ActionThink, Risk: policy.RiskLow, RollbackSupported: true,
	})
	fmt.Println(d.Effect, d.DecidedBy)
	// Output:
	// default.cedar -> strict.cedar
	// deny [none]
}

// Combine joins the decisions on a composite's children: any deny blocks
// the whole.
func ExampleCombine() {
	engine := policy.Default()
	ctx := context.Background()
	child := func(action, path string, risk string) policy.Decision {
		return engine.Decide(ctx, policy.Request{Principal: "bc1pexampleagent", Action: action,
			Paths: []string{path}, Risk: risk, RollbackSupported: true})
	}
	d := policy.Combine(
		child(policy.ActionWriteFile, "/sandbox/a.md", policy.RiskMedium),
		child(policy.ActionDeleteFile, "/sandbox/b.md", policy.RiskHigh),
		child(policy.ActionWriteFile, "/etc/passwd", policy.RiskMedium),
	)
	fmt.Println(d.Effect, d.DecidedBy)
	// Output:
	// deny [host:sandbox-only]
}
