package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// A bound is the range Validate holds one numeric setting to. The docs'
// row of the setting states it as [bound.rule] words it
// (TestSettingsDocRanges), so that what an operator reads is what the
// node refuses.
type bound struct {
	// key is the setting's TOML name: "workers", "agent.max_steps".
	key string
	// min is the least value; above makes it the value the setting must
	// be more than (a time-out more than 0). A duration's are in
	// nanoseconds.
	min   float64
	above bool
	// max is the greatest value; 0: none (no range ends at 0).
	max float64
	// minKey and maxKey name another setting whose value bounds this one
	// in place of min and max: http_body_memory at least http_max_body.
	// A maxKey whose value is 0 (a default derived at start) bounds
	// nothing.
	minKey, maxKey string
	// orZero allows 0 beside the range: memory_limit is 0 or at least
	// 16 MiB.
	orZero bool
	// zero says what 0 means, for the error's words: "no limit".
	zero string
	// unit is what the value counts, plural: "bytes", "model calls".
	unit string
}

// bounds are the ranges of every numeric setting, in the order of
// Config. Validate reads them and nothing else for these settings.
var bounds = []bound{
	{key: "relay_max_conns", zero: "the relay's default"},
	{key: "relay_max_conns_per_peer", maxKey: "relay_max_conns", zero: "the relay's default"},
	{key: "relay_store_max_events", zero: "the relay's default", unit: "events"},
	{key: "relay_store_max_bytes", zero: "the relay's default", unit: "bytes"},
	{key: "relay_store_peer_share", max: 1, zero: "no share"},
	{key: "relay_event_rate", zero: "no limit"},
	{key: "relay_event_burst", min: 1},
	{key: "http_max_body", min: 1024, max: MaxHTTPBody, unit: "bytes"},
	{key: "http_max_response", min: MinHTTPResponse, max: MaxHTTPResponse, unit: "bytes"},
	{key: "http_rate", zero: "no limit"},
	{key: "http_burst", min: 1},
	{key: "monitor_rate", zero: "no limit"},
	{key: "monitor_burst", min: 1},
	{key: "http_max_conns", zero: "from the open-file limit"},
	{key: "http_max_conns_per_peer", maxKey: "http_max_conns", zero: "from the open-file limit"},
	{key: "http_body_memory", minKey: "http_max_body"},
	{key: "http_answer_memory", minKey: "http_max_response"},
	{key: "identity_rate", zero: "no limit"},
	{key: "identity_burst", min: 1},
	{key: "nostr_key_rate", zero: "no limit"},
	{key: "nostr_key_burst", min: 1},
	{key: "max_streams", min: 1},
	{key: "max_streams_per_identity", min: 1},
	{key: "max_streams_per_key", min: 1},
	{key: "max_newcomer_streams", maxKey: "max_streams", zero: "half of max_streams"},
	{key: "stream_wait_timeout", zero: "refuse at once"},
	{key: "max_stream_waiters", min: 1},
	{key: "request_timeout", above: true},
	{key: "background_timeout", above: true},
	{key: "service_timeout", above: true},
	{key: "max_drift", min: float64(time.Second)},
	// The inbox would take a reply_ttl of 0 or less for its default, 7
	// days, and a reply expiring within a second is gone before it is
	// read.
	{key: "reply_ttl", min: float64(time.Second)},
	{key: "task_retention", zero: "keep"},
	{key: "max_live_tasks_per_requester", zero: "no bound"},
	{key: "max_live_tasks", zero: "no bound"},
	{key: "reconcile_after", min: float64(time.Second)},
	{key: "workers", min: 1},
	{key: "memory_limit", min: MinMemoryLimit, orZero: true, zero: "GOMEMLIMIT, else none", unit: "bytes"},

	{key: "agent.max_steps", min: 1, max: MaxAgentSteps, unit: "model calls"},
	{key: "agent.max_cost_cents", zero: "no limit", unit: "US cents"},
	{key: "agent.max_time_minutes", above: true, max: maxTimeMinutes, unit: "minutes"},
	{key: "agent.price_per_mtok_prompt", unit: "US dollars a million tokens"},
	{key: "agent.price_per_mtok_completion", unit: "US dollars a million tokens"},
	{key: "agent.temperature", max: 2},
	{key: "agent.max_tokens", min: 1, unit: "tokens"},
	{key: "agent.request_timeout", above: true},
	{key: "agent.context_tokens", orZero: true, above: true, minKey: "agent.max_tokens", zero: "ask the model server"},
	{key: "agent.max_jobs", min: 1, unit: "jobs"},
	{key: "agent.max_jobs_per_requester", maxKey: "agent.max_jobs", zero: "half of agent.max_jobs"},
	{key: "agent.max_queued_jobs", min: 1, unit: "jobs"},
	{key: "agent.max_queued_jobs_per_requester", maxKey: "agent.max_queued_jobs", zero: "a sixteenth of agent.max_queued_jobs"},
	{key: "agent.max_newcomer_queued_jobs", maxKey: "agent.max_queued_jobs", zero: "half of agent.max_queued_jobs"},
	{key: "agent.lease", min: float64(time.Second)},
	{key: "agent.retry_backoff", max: float64(time.Minute), zero: "the default"},
	{key: "agent.max_observation_bytes", min: 1, unit: "bytes"},
	{key: "agent.max_answer_bytes", min: 1, unit: "bytes"},
	{key: "agent.max_pending_input_bytes", min: 4096, unit: "bytes"},
	{key: "agent.max_history_bytes", min: 1, unit: "bytes"},
	{key: "agent.max_retries"},
	{key: "agent.step_timeout", zero: "the request time-out"},

	{key: "executor.quota_bytes", min: 1, unit: "bytes"},
	{key: "executor.quota_files", min: 1},
	{key: "executor.quota_dirs", min: 1},
	{key: "executor.workspace_max_bytes", min: 1, unit: "bytes"},
	{key: "executor.workspace_max_entries", min: 1},
	{key: "executor.snapshot_max_age", zero: "whatever their age"},
	{key: "executor.snapshot_max_bytes", zero: "no bound", unit: "bytes"},

	{key: "audit.retain_days", max: MaxAuditRetainDays, zero: "keep every entry", unit: "days"},
}

// checkBounds returns an error for each setting of c outside its bound.
// A setting in a table is named with its flag or variable, as the
// table's other errors are: "config: agent.max_steps (--agent-max-steps):
// want 1…10000 model calls; got 0"; one at the top as "config: workers
// 0: want at least 1".
func checkBounds(c *Config) []error {
	var errs []error
	for _, b := range bounds {
		v := settingValue(c, b.key)
		if b.holds(c) {
			continue
		}
		if _, _, table := strings.Cut(b.key, "."); table {
			env := "SNAPNODE_" + strings.ToUpper(strings.ReplaceAll(b.key, ".", "_"))
			errs = append(errs, fmt.Errorf("config: %s (%s): want %s; got %v", b.key, source(env), b.rule(c), v.Interface()))
			continue
		}
		errs = append(errs, fmt.Errorf("config: %s %v: want %s", b.key, v.Interface(), b.rule(c)))
	}
	return errs
}

// holds reports whether c's value of the setting is within b.
func (b bound) holds(c *Config) bool {
	x, isFloat := number(settingValue(c, b.key))
	if isFloat && (math.IsNaN(x) || math.IsInf(x, 0)) {
		return false
	}
	if b.orZero && x == 0 {
		return true
	}
	lo := b.min
	if b.minKey != "" {
		lo, _ = number(settingValue(c, b.minKey))
	}
	if x < lo || b.above && x == lo {
		return false
	}
	if b.maxKey != "" {
		hi, _ := number(settingValue(c, b.maxKey))
		return hi <= 0 || x <= hi
	}
	return b.max == 0 || x <= b.max
}

// rule words b as the docs state it ("1024…10485760 bytes", "at least
// 1s", "0 or more"), setting names written in full ("agent.max_jobs").
// With c, it is worded for an error: what 0 means follows the 0, and a
// setting named is followed by c's value of it.
func (b bound) rule(c *Config) string {
	typ := settingValue(ptr(Default()), b.key).Type()
	num := func(x float64) string {
		if x != 0 && typ == reflect.TypeFor[Duration]() {
			return shortDuration(time.Duration(x))
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	ref := func(key string) string {
		if c == nil {
			return key
		}
		x, _ := number(settingValue(c, key))
		return fmt.Sprintf("%s (%s)", key, num(x))
	}
	unit := func(n string) string {
		switch {
		case b.unit == "":
			return n
		case n == "1":
			return n + " " + strings.TrimSuffix(b.unit, "s")
		}
		return n + " " + b.unit
	}
	zero, sep := "0", "…"
	if c != nil && b.zero != "" {
		zero, sep = "0 ("+b.zero+")", " to "
	}
	lo := num(b.min)
	if b.minKey != "" {
		lo = ref(b.minKey)
	}
	if b.min == 0 && b.minKey == "" && !b.above {
		lo = zero
	}
	switch {
	case b.orZero && b.above:
		return zero + " or more than " + unit(lo)
	case b.orZero:
		return zero + " or at least " + unit(lo)
	case b.maxKey != "":
		hi := ref(b.maxKey)
		if mayBeZero(b.maxKey) {
			if c != nil {
				if x, _ := number(settingValue(c, b.maxKey)); x > 0 {
					return lo + " or more, at most " + hi
				}
			}
			return lo + " or more, at most " + hi + " when that is not 0"
		}
		return lo + sep + hi
	case b.max != 0 && b.above:
		return "more than " + lo + ", at most " + unit(num(b.max))
	case b.max != 0:
		if b.min == 0 && typ == reflect.TypeFor[Duration]() {
			lo = strings.Replace(lo, "0", "0s", 1)
		}
		return lo + sep + unit(num(b.max))
	case b.above:
		return "more than " + unit(lo)
	case b.min == 0 && b.minKey == "":
		if b.unit == "" {
			return lo + " or more"
		}
		return lo + " or more " + b.unit
	}
	return "at least " + unit(lo)
}

// mayBeZero reports whether the setting key may be 0 by its bound.
func mayBeZero(key string) bool {
	for _, b := range bounds {
		if b.key == key {
			return b.orZero || b.min == 0 && b.minKey == "" && !b.above
		}
	}
	return false
}

// settingValue returns the field of c that the setting key (a TOML name,
// "agent.max_steps") sets.
func settingValue(c *Config, key string) reflect.Value {
	v := reflect.ValueOf(c).Elem()
	for part := range strings.SplitSeq(key, ".") {
		v = fieldByTag(v, part)
		if !v.IsValid() {
			panic("config: no setting " + key)
		}
	}
	return v
}

// fieldByTag returns the field of the struct v whose TOML name is tag.
func fieldByTag(v reflect.Value, tag string) reflect.Value {
	for i := range v.NumField() {
		if name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("toml"), ","); name == tag {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}

// number returns the numeric setting v as a float64 (a duration in
// nanoseconds), and whether it is a float64 setting.
func number(v reflect.Value) (x float64, isFloat bool) {
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		return float64(v.Int()), false
	case reflect.Float64:
		return v.Float(), true
	case reflect.Struct: // Duration
		return float64(v.Interface().(Duration).Duration), false
	}
	panic("config: not a number: " + v.Type().String())
}

// shortDuration writes d as the docs do: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func ptr[T any](v T) *T { return &v }
