package snap_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/snapref"
	"github.com/snapnode/snapnode/snap"
)

// The published schema test cases (schemas/tests/*.test.json) check only
// what a JSON Schema can: their addresses match the pattern
// ^(bc1p|tb1p)[a-z0-9]{58}$ but FAIL their bech32m checksum, and their
// signatures are placeholders. So the envelope cases are run through the
// stages a schema covers (snap.ParseThrough up to StageConstraints), and
// then through full snap.Parse, which must reject the "valid" ones with
// 2005 because of the checksum. Agent cards are parsed with snap.ParseCard,
// which decodes the identity in full; their identity is replaced by a
// checksum-valid address first.

// scUnknownFieldAccepted lists the envelope cases that the schema rejects
// only because of a member not named in it and without the x- prefix.
// snapnode accepts them by design: unknown envelope fields are ignored and
// are not signed (the SNAP specification's field constraints say receivers
// MUST ignore them, while the schema has additionalProperties:false).
var scUnknownFieldAccepted = map[string]bool{
	"INVALID: unknown field without x- prefix": true,
}

// scRejectedAfterConstraints lists envelope cases the schema rejects for a
// rule snapnode checks after the constraints stage, with the code the full
// validator answers once the addresses are made checksum-valid. The schema
// requires sig on a request (if/then); snapnode checks it with the
// signature, where its absence is 2002 SignatureMissing
// (docs/conformance.md, envelope and validation order).
var scRejectedAfterConstraints = map[string]snap.Code{
	"INVALID: request without sig": snap.CodeSignatureMissing,
}

// scEnvelopeRejections gives, for the envelope cases rejected at or before
// the constraints stage, the code and data.field snapnode answers.
var scEnvelopeRejections = map[string]struct {
	code  snap.Code
	field string
}{
	"INVALID: missing id":                          {snap.CodeInvalidPayload, "id"},
	"INVALID: id with special characters":          {snap.CodeInvalidPayload, "id"},
	"INVALID: unknown type value":                  {snap.CodeInvalidPayload, "type"},
	"INVALID: sig too short":                       {snap.CodeInvalidPayload, "sig"},
	"INVALID: sig with uppercase hex":              {snap.CodeInvalidPayload, "sig"},
	"INVALID: non-P2TR address (wrong prefix)":     {snap.CodeIdentityInvalid, "from"},
	"INVALID: method wrong format (missing slash)": {snap.CodeInvalidPayload, "method"},
	"INVALID: timestamp is float":                  {snap.CodeInvalidPayload, "timestamp"},
	"INVALID: negative timestamp":                  {snap.CodeInvalidPayload, "timestamp"},
	"INVALID: empty id":                            {snap.CodeInvalidPayload, "id"},
}

// scValidAddress returns the checksum-valid address of key 0a×32 (for
// from) or 0b×32 (for to) on the network of addr.
func scValidAddress(field, addr string) string {
	k := strings.Repeat("0a", 32)
	if field == "to" {
		k = strings.Repeat("0b", 32)
	}
	key, err := identity.FromHex(k)
	if err != nil {
		panic(err)
	}
	if strings.HasPrefix(addr, "tb1") {
		return key.Address(identity.Testnet)
	}
	return key.Address(identity.Mainnet)
}

// scWithValidAddresses replaces from and to (when they are strings) by
// checksum-valid addresses of the same network.
func scWithValidAddresses(t *testing.T, data json.RawMessage) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"from", "to"} {
		var s string
		if v, ok := m[f]; ok && json.Unmarshal(v, &s) == nil {
			b, _ := json.Marshal(scValidAddress(f, s))
			m[f] = b
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func scSnapError(t *testing.T, err error) *snap.Error {
	t.Helper()
	var se *snap.Error
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *snap.Error", err, err)
	}
	return se
}

func TestSchemaEnvelopeCases(t *testing.T) {
	var st snapref.SchemaTests
	snapref.Load(t, "schemas/tests/envelope.test.json", &st)
	if len(st.Tests) == 0 {
		t.Fatal("no cases")
	}
	used := map[string]bool{}
	for _, c := range st.Tests {
		t.Run(c.Description, func(t *testing.T) {
			used[c.Description] = true
			_, err := snap.ParseThrough(c.Data, snap.StageConstraints)
			switch {
			case c.Valid, scUnknownFieldAccepted[c.Description]:
				if err != nil {
					t.Fatalf("ParseThrough(constraints) = %v, want accepted", err)
				}
				// Full parsing decodes the addresses: the published
				// examples use addresses whose bech32m checksum fails.
				_, err := snap.Parse(c.Data)
				se := scSnapError(t, err)
				if se.Code != snap.CodeIdentityInvalid || se.Field() != "from" {
					t.Fatalf("Parse = %v, want 2005 on from", se)
				}
				if r, _ := se.Data["reason"].(string); !strings.Contains(r, "checksum") {
					t.Errorf("reason %q does not mention the checksum", r)
				}
				// With checksum-valid addresses the case passes every
				// stateless stage (the signatures are placeholders, so
				// nothing is verified here).
				if _, err := snap.Parse(scWithValidAddresses(t, c.Data)); err != nil {
					t.Errorf("Parse with valid addresses = %v", err)
				}
			case scRejectedAfterConstraints[c.Description] != 0:
				want := scRejectedAfterConstraints[c.Description]
				if err != nil {
					t.Fatalf("ParseThrough(constraints) = %v; this case is expected to fail later, with %d", err, want)
				}
				raw := scWithValidAddresses(t, c.Data)
				m, err := snap.Parse(raw)
				if err != nil {
					t.Fatalf("Parse with valid addresses = %v", err)
				}
				v := snap.NewValidator(snap.Config{Now: func() time.Time { return time.Unix(m.Timestamp, 0) }})
				_, err = v.Validate(context.Background(), raw)
				if se := scSnapError(t, err); se.Code != want {
					t.Fatalf("Validate = %v, want %d", se, want)
				}
			default:
				if err == nil {
					t.Fatal("ParseThrough(constraints) accepted a case the schema rejects")
				}
				se := scSnapError(t, err)
				want, ok := scEnvelopeRejections[c.Description]
				if !ok {
					t.Fatalf("new published case rejected with %v; add it to scEnvelopeRejections", se)
				}
				if se.Code != want.code || se.Field() != want.field {
					t.Errorf("got %v, want code %d field %q", se, want.code, want.field)
				}
			}
		})
	}
	for _, m := range []map[string]bool{scUnknownFieldAccepted, keysOf(scRejectedAfterConstraints), keysOf(scEnvelopeRejections)} {
		for d := range m {
			if !used[d] {
				t.Errorf("case %q is listed here but not in envelope.test.json", d)
			}
		}
	}
}

func keysOf[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// scCardIdentity is the checksum-valid address of key 0a×32, put in place
// of the published cards' checksum-invalid identity.
const scCardIdentity = "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397"

// scCardRejections gives the data.field of each published invalid card.
var scCardRejections = map[string]string{
	"INVALID: missing required field (identity)": "identity",
	"INVALID: empty skills array":                "skills",
	"INVALID: version not semver":                "version",
	"INVALID: skill id with uppercase":           "skills[0].id",
	"INVALID: endpoint with unknown protocol":    "endpoints[0].protocol",
	"INVALID: skill tag with uppercase":          "skills[0].tags[0]",
}

// scReplaceIdentity returns data with its identity (when present) replaced
// by id.
func scReplaceIdentity(t *testing.T, data json.RawMessage, id string) ([]byte, bool) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["identity"]; !ok {
		return data, false
	}
	m["identity"], _ = json.Marshal(id)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out, true
}

func TestSchemaAgentCardCases(t *testing.T) {
	var st snapref.SchemaTests
	snapref.Load(t, "schemas/tests/agent-card.test.json", &st)
	if len(st.Tests) == 0 {
		t.Fatal("no cases")
	}
	used := map[string]bool{}
	for _, c := range st.Tests {
		t.Run(c.Description, func(t *testing.T) {
			used[c.Description] = true
			raw, replaced := scReplaceIdentity(t, c.Data, scCardIdentity)
			card, err := snap.ParseCard(raw)
			if c.Valid {
				if err != nil {
					t.Fatalf("ParseCard (identity replaced) = %v", err)
				}
				if card.Identity != scCardIdentity {
					t.Errorf("identity %q", card.Identity)
				}
				// The card also passes Validate, and survives a round
				// trip through its own JSON form.
				if err := card.Validate(); err != nil {
					t.Errorf("Validate = %v", err)
				}
				b, _ := json.Marshal(card)
				if _, err := snap.ParseCard(b); err != nil {
					t.Errorf("ParseCard of the re-encoded card = %v", err)
				}
				// The published identity fails its checksum.
				_, err := snap.ParseCard(c.Data)
				se := scSnapError(t, err)
				if se.Code != snap.CodeAgentCardInvalid || se.Field() != "identity" || se.Data["constraint"] != "p2tr" {
					t.Errorf("ParseCard (published identity) = %v, want 3002 identity p2tr", se)
				}
				var id string
				var m map[string]json.RawMessage
				json.Unmarshal(c.Data, &m)
				json.Unmarshal(m["identity"], &id)
				if _, perr := identity.ParseAddress(id); !errors.Is(perr, identity.ErrChecksum) {
					t.Errorf("published identity %s: ParseAddress = %v, want a checksum failure", id, perr)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseCard accepted a card the schema rejects (identity replaced: %v)", replaced)
			}
			se := scSnapError(t, err)
			want, ok := scCardRejections[c.Description]
			if !ok {
				t.Fatalf("new published case rejected with %v; add it to scCardRejections", se)
			}
			if se.Code != snap.CodeAgentCardInvalid || se.Field() != want {
				t.Errorf("got %v, want 3002 field %q", se, want)
			}
		})
	}
	for d := range scCardRejections {
		if !used[d] {
			t.Errorf("case %q is listed here but not in agent-card.test.json", d)
		}
	}
}

// Guard against a silent change of the reference files: every published
// address in the schema cases fails its checksum (which is why the tests
// above replace them).
func TestSchemaCaseAddressesFailChecksum(t *testing.T) {
	for _, f := range []string{"schemas/tests/envelope.test.json", "schemas/tests/agent-card.test.json"} {
		var st snapref.SchemaTests
		snapref.Load(t, f, &st)
		n := 0
		for _, c := range st.Tests {
			var m map[string]json.RawMessage
			if json.Unmarshal(c.Data, &m) != nil {
				continue
			}
			for _, k := range []string{"from", "to", "identity"} {
				var s string
				if json.Unmarshal(m[k], &s) != nil || !strings.HasPrefix(s, "bc1p") && !strings.HasPrefix(s, "tb1p") {
					continue
				}
				n++
				if _, err := identity.ParseAddress(s); !errors.Is(err, identity.ErrChecksum) {
					t.Errorf("%s: %q: %s: ParseAddress = %v, want a checksum failure", f, c.Description, k, err)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no addresses found", f)
		}
	}
}
