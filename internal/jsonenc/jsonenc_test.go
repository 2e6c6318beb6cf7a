package jsonenc

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
)

func TestMarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"HTML characters stay as they are", map[string]string{"a": "<b> & </b>"}, `{"a":"<b> & </b>"}`},
		{"no trailing newline", []int{1, 2}, `[1,2]`},
		{"the rest is json.Marshal's", struct {
			A string `json:"a,omitempty"`
			B []byte `json:"b"`
		}{B: []byte("hi")}, `{"b":"aGk="}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("Marshal = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestMarshalError(t *testing.T) {
	_, err := Marshal(math.Inf(1))
	var ue *json.UnsupportedValueError
	if !errors.As(err, &ue) {
		t.Fatalf("Marshal(+Inf) error %v, want a *json.UnsupportedValueError", err)
	}
}
