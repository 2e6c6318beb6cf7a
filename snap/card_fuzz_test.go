package snap_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/snapnode/snapnode/internal/snapref"
	"github.com/snapnode/snapnode/snap"
)

// fzCardSchema returns the published Agent Card schema when the
// snap-reference folder is there, else nil: the fuzz targets below check
// their other properties without it.
func fzCardSchema(f *testing.F) *jsonschema.Schema {
	dir := os.Getenv(snapref.EnvDir)
	if dir == "" {
		dir = filepath.Join(filepath.Dir(snapref.ModuleRoot(f)), "shared", "snap-reference")
	}
	if _, err := os.Stat(filepath.Join(dir, "schemas", "agent-card.schema.json")); err != nil {
		return nil
	}
	return snapref.Schemas(f)("agent-card.schema.json")
}

// fzUndocumented returns the schema's complaints about a card ParseCard
// accepted, less those docs/conformance.md lists as choices: media types
// as RFC 6838 reads them, not the schema's pattern, and ws:// relays on
// loopback.
func fzUndocumented(ve *jsonschema.ValidationError) []string {
	var bad []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		if p, ok := e.ErrorKind.(*kind.Pattern); ok && len(e.InstanceLocation) == 2 {
			switch e.InstanceLocation[0] {
			case "defaultInputModes", "defaultOutputModes":
				return
			case "nostrRelays":
				if strings.HasPrefix(p.Got, "ws://") {
					return
				}
			}
		}
		bad = append(bad, "/"+strings.Join(e.InstanceLocation, "/")+": "+fmt.Sprint(e.ErrorKind))
	}
	walk(ve)
	return bad
}

// fzCardSeeds adds the published cases (their identities replaced by one
// whose checksum holds) and the repository's own card.
func fzCardSeeds(f *testing.F) [][]byte {
	seeds := [][]byte{[]byte(ctVectorCard), []byte(`{}`), []byte(`{"name":null}`)}
	if fzCardSchema(f) != nil {
		var st snapref.SchemaTests
		snapref.Load(f, "schemas/tests/agent-card.test.json", &st)
		for _, c := range st.Tests {
			var m map[string]json.RawMessage
			if json.Unmarshal(c.Data, &m) != nil {
				continue
			}
			if _, ok := m["identity"]; ok {
				m["identity"], _ = json.Marshal(scCardIdentity)
			}
			b, _ := json.Marshal(m)
			seeds = append(seeds, b)
		}
	}
	return seeds
}

// FuzzParseCard feeds arbitrary bytes to ParseCard, which reads the cards
// peers publish (a kind-31337 event, a well-known document). It must not
// panic and must fail only with 3002 AgentCardInvalid; a card it accepts
// passes Validate, the published schema agrees with it (when the vectors
// are there), and re-encoded it parses to the same card.
func FuzzParseCard(f *testing.F) {
	schema := fzCardSchema(f)
	for _, s := range fzCardSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := snap.ParseCard(raw)
		if err != nil {
			var se *snap.Error
			if !errors.As(err, &se) || se.Code != snap.CodeAgentCardInvalid {
				t.Fatalf("error is not a 3002 *snap.Error: %T %v", err, err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted card fails Validate: %v\n%s", err, raw)
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("accepted card does not marshal: %v", err)
		}
		if schema != nil {
			// The card as read, re-encoded: the fields it does not
			// define are ignored by choice (docs/conformance.md).
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
			if err != nil {
				t.Fatalf("accepted card is not JSON to the schema's reader: %v\n%s", err, out)
			}
			var ve *jsonschema.ValidationError
			if err := schema.Validate(doc); errors.As(err, &ve) {
				if bad := fzUndocumented(ve); len(bad) > 0 {
					t.Fatalf("ParseCard accepted a card the published schema rejects: %s\n%s", bad, raw)
				}
			} else if err != nil {
				t.Fatal(err)
			}
		}
		again, err := snap.ParseCard(out)
		if err != nil {
			t.Fatalf("re-encoded card rejected: %v\n%s\nfrom %s", err, out, raw)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip changed the card:\n%+v\n%+v", c, again)
		}
	})
}

// FuzzVerifySignedCard feeds arbitrary bytes to VerifySignedCard, which
// reads a peer's well-known card document. It must not panic and must fail
// only with a *snap.Error; a document it accepts holds a card that
// ParseCard reads the same, signed by the card's own identity.
func FuzzVerifySignedCard(f *testing.F) {
	doc, _ := json.Marshal(&snap.SignedCard{Card: json.RawMessage(ctVectorCard), Sig: ctVectorSig, PublicKey: ctVectorPublicKey, Timestamp: ctVectorTime})
	f.Add(doc)
	f.Add([]byte(`{"card":{},"sig":"","publicKey":"","timestamp":1}`))
	f.Add([]byte(`{"card":1,"sig":1,"publicKey":1,"timestamp":1.5}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, sc, err := snap.VerifySignedCard(raw)
		if err != nil {
			var se *snap.Error
			if !errors.As(err, &se) {
				t.Fatalf("untyped error %T: %v", err, err)
			}
			return
		}
		again, err := snap.ParseCard(sc.Card)
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("the accepted document's card parses otherwise: %v\n%s", err, raw)
		}
	})
}
