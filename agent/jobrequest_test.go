package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The schema's job request examples: the valid ones parse, each invalid
// one is refused naming its field and rule; data without a
// task_description is not a job request at all.
func TestParseJobRequest(t *testing.T) {
	for _, kind := range []string{"valid", "invalid"} {
		paths, _ := filepath.Glob(filepath.Join("..", "schemas", "testdata", "job-request", kind, "*.json"))
		if len(paths) < 2 {
			t.Fatalf("%s: no examples", kind)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			req, err := ParseJobRequest(b)
			var je *JobRequestError
			switch {
			case kind == "valid" && (err != nil || req.TaskDescription == ""):
				t.Errorf("%s: %v", p, err)
			case kind == "invalid" && (!errors.As(err, &je) || je.Field == "" || je.Rule == ""):
				t.Errorf("%s: %v; want a *JobRequestError naming the field and the rule", p, err)
			}
		}
	}
	for _, c := range []struct{ data, field, rule string }{
		{`{"job_id":"j","phase":"a b","context_files":[],"system_prompt":"","task_description":"x","metadata":{"accepted_formats":[]}}`, "/phase", "does not match pattern"},
		{`{"job_id":"j","phase":"w","context_files":[],"system_prompt":"","task_description":"x","metadata":{"max_steps":-2,"accepted_formats":[]}}`, "/metadata/max_steps", "minimum"},
		{`{"task_description":"x"}`, "/", "missing propert"},
		{`{"task_description":"x","task_description":"y"}`, "/", "every member name appears once"},
	} {
		_, err := ParseJobRequest([]byte(c.data))
		var je *JobRequestError
		if !errors.As(err, &je) || je.Field != c.field || !strings.Contains(je.Rule, c.rule) {
			t.Errorf("%s: %v; want field %s, rule with %q", c.data, err, c.field, c.rule)
		}
	}
	for _, data := range []string{`{"schema_version":"1.0.0"}`, `[1]`, `"task_description"`, `{"summary":"x"}`, `not json`} {
		if _, err := ParseJobRequest([]byte(data)); !errors.Is(err, ErrNotJobRequest) {
			t.Errorf("%s: %v; want ErrNotJobRequest", data, err)
		}
	}
}

func FuzzParseJobRequest(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("..", "schemas", "testdata", "job-request", "*", "*.json"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := ParseJobRequest(data)
		var je *JobRequestError
		switch {
		case err == nil:
			if req == nil || req.TaskDescription == "" || req.Phase == "" || req.Metadata.MaxSteps < 0 || req.Metadata.CostThreshold < 0 {
				t.Fatalf("accepted %q as %+v", data, req)
			}
		case errors.Is(err, ErrNotJobRequest), errors.As(err, &je):
			if req != nil {
				t.Fatal("a request with an error")
			}
		default:
			t.Fatalf("error of type %T: %v", err, err)
		}
	})
}

// A peer's thresholds lower the operator's limits and never raise them.
func TestLimitsFor(t *testing.T) {
	r := &Runtime{cfg: Config{MaxSteps: 30, MaxCostCents: 100, MaxTime: time.Hour}}
	nolimit := &Runtime{cfg: Config{MaxSteps: 30, MaxTime: time.Hour}}
	for _, c := range []struct {
		name string
		r    *Runtime
		md   *JobRequestMetadata
		want limits
	}{
		{"no request", r, nil, limits{30, 100, time.Hour}},
		{"no thresholds", r, &JobRequestMetadata{}, limits{30, 100, time.Hour}},
		{"lower", r, &JobRequestMetadata{MaxSteps: 5, CostThreshold: 10, TimeThresholdMinutes: 2}, limits{5, 10, 2 * time.Minute}},
		{"higher are clamped", r, &JobRequestMetadata{MaxSteps: 500, CostThreshold: 1000, TimeThresholdMinutes: 600}, limits{30, 100, time.Hour}},
		{"a cost where the operator has none", nolimit, &JobRequestMetadata{CostThreshold: 7}, limits{30, 7, time.Hour}},
	} {
		var req *JobRequest
		if c.md != nil {
			req = &JobRequest{Metadata: *c.md}
		}
		if got := c.r.limitsFor(req); got != c.want {
			t.Errorf("%s: %+v; want %+v", c.name, got, c.want)
		}
	}
}
