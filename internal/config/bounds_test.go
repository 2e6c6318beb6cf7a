package config

import (
	"math"
	"reflect"
	"slices"
	"testing"
	"time"
)

// Every numeric setting has its bound, and Validate holds each setting
// to its bound exactly: the least and greatest values are taken, those
// just past them refused (a nanosecond, the next float64), as are NaN
// and ±Inf; 0 where the bound allows it beside its range; a bound by
// another setting follows that setting's value.
func TestValidateHoldsBounds(t *testing.T) {
	def := Default()
	if err := def.Validate(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, b := range bounds {
		if slices.Contains(keys, b.key) {
			t.Errorf("%s: two bounds", b.key)
		}
		keys = append(keys, b.key)
	}
	for _, k := range fileKeys(reflect.TypeFor[Config](), "") {
		switch settingValue(&def, k).Type() {
		case reflect.TypeFor[int](), reflect.TypeFor[int64](), reflect.TypeFor[float64](), reflect.TypeFor[Duration]():
			if !slices.Contains(keys, k) {
				t.Errorf("numeric setting %s has no bound", k)
			}
		}
	}

	for _, b := range bounds {
		typ := settingValue(&def, b.key).Type()
		// try sets the setting (and the setting bounding it, ref, to
		// refValue) and reports whether Validate takes it.
		try := func(x float64, ref string, refValue float64) bool {
			c := Default()
			if ref != "" {
				set(settingValue(&c, ref), refValue)
			}
			set(settingValue(&c, b.key), x)
			return c.Validate() == nil
		}
		want := func(x float64, ref string, refValue float64, ok bool) {
			t.Helper()
			if got := try(x, ref, refValue); got != ok {
				t.Errorf("%s = %v (%s %v): Validate took it %v, want %v (bound %q)", b.key, x, ref, refValue, got, ok, b.rule(nil))
			}
		}
		below := func(x float64) float64 {
			if typ == reflect.TypeFor[float64]() {
				return math.Nextafter(x, math.Inf(-1))
			}
			return x - 1
		}
		above := func(x float64) float64 {
			if typ == reflect.TypeFor[float64]() {
				return math.Nextafter(x, math.Inf(1))
			}
			return x + 1
		}
		lo, ref, refValue := b.min, "", 0.0
		if b.minKey != "" {
			ref = b.minKey
			refValue, _ = number(settingValue(&def, ref))
			lo = refValue
		}
		if b.above {
			want(lo, ref, refValue, b.orZero && lo == 0)
			want(above(lo), ref, refValue, true)
		} else {
			want(lo, ref, refValue, true)
			want(below(lo), ref, refValue, b.orZero && below(lo) == 0)
		}
		if b.orZero {
			want(0, ref, refValue, true)
			want(-1, ref, refValue, false)
		}
		switch {
		case b.maxKey != "":
			hi, _ := number(settingValue(&def, b.maxKey))
			if hi <= 0 {
				hi = 100
			}
			want(hi, b.maxKey, hi, true)
			want(above(hi), b.maxKey, hi, false)
			if mayBeZero(b.maxKey) {
				want(above(hi), b.maxKey, 0, true)
			}
		case b.max != 0:
			want(b.max, "", 0, true)
			want(above(b.max), "", 0, false)
		}
		if typ == reflect.TypeFor[float64]() {
			for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				want(x, "", 0, false)
			}
		}
	}
}

// set sets the numeric setting v to x (a duration's in nanoseconds).
func set(v reflect.Value, x float64) {
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(x))
	case reflect.Float64:
		v.SetFloat(x)
	default:
		v.Set(reflect.ValueOf(Duration{time.Duration(x)}))
	}
}
