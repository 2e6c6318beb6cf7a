package snap_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

var (
	ctKeyA = mfMustKey(strings.Repeat("0a", 32))
	ctKeyB = mfMustKey(strings.Repeat("0b", 32))
)

// A supplementary vector (not an official one): the well-known
// SignedAgentCard of key 0a×32 at 1738627200, made by the reference SDK
// 0.5.0 with zero aux_rand.
const (
	ctVectorTime     = 1738627200
	ctVectorIdentity = "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397"
	ctVectorCard     = `{"name":"Echo","description":"Echo agent","version":"1.0.0","identity":"bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397",
 "skills":[{"id":"echo","name":"Echo","description":"Echoes","tags":["test"]}],"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"]}`
	ctVectorInput     = `{"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"description":"Echo agent","identity":"bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397","name":"Echo","skills":[{"description":"Echoes","id":"echo","name":"Echo","tags":["test"]}],"version":"1.0.0"}|1738627200`
	ctVectorSHA256    = "0be7c870c07a3c8b1b6a120a5262a02d776d996b3031ef5f79d1468958705d7e"
	ctVectorPublicKey = "2b07498923bde6b9779fde46f5308dec34f464f01929af5b66be30fc3e0b3011"
	ctVectorSig       = "93ef590ee5e7c5819cfdef33adc69ed93226f87ad9f823bb162a7bda2d0ff3a3dc9543d34fe60f77fb70f154a62858b13402563302f93ae303de48d5d097af0d"
)

func ctVectorCardValue() *snap.Card {
	return &snap.Card{
		Name: "Echo", Description: "Echo agent", Version: "1.0.0", Identity: ctVectorIdentity,
		Skills:             []snap.Skill{{ID: "echo", Name: "Echo", Description: "Echoes", Tags: []string{"test"}}},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
	}
}

// ctDoc serializes a well-known document.
func ctDoc(t *testing.T, sc *snap.SignedCard) []byte {
	t.Helper()
	b, err := json.Marshal(sc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ctSignRaw signs the card text raw with k at ts the way the spec says,
// whatever the card's identity: SHA-256(JCS(card) ‖ "|" ‖ ts).
func ctSignRaw(t *testing.T, raw []byte, k *identity.Key, ts int64) *snap.SignedCard {
	t.Helper()
	canon, err := snap.Canonicalize(raw)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256(fmt.Appendf(canon, "|%d", ts))
	sig, err := k.SignWithAux(d, [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	q := k.OutputKey()
	return &snap.SignedCard{Card: raw, Sig: hex.EncodeToString(sig[:]), PublicKey: hex.EncodeToString(q[:]), Timestamp: ts}
}

func ctError(t *testing.T, err error, code snap.Code, field string) *snap.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want %d field %q", code, field)
	}
	var se *snap.Error
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *snap.Error", err, err)
	}
	if se.Code != code || se.Field() != field {
		t.Fatalf("got %v, want %d field %q", se, code, field)
	}
	return se
}

func TestWellKnownCardVector(t *testing.T) {
	c := ctVectorCardValue()
	sc, err := snap.SignCardWithAux(c, ctKeyA, time.Unix(ctVectorTime, 0), [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Sig != ctVectorSig {
		t.Errorf("sig\n got  %s\n want %s", sc.Sig, ctVectorSig)
	}
	if sc.PublicKey != ctVectorPublicKey {
		t.Errorf("publicKey %s, want %s", sc.PublicKey, ctVectorPublicKey)
	}
	if sc.Timestamp != ctVectorTime {
		t.Errorf("timestamp %d", sc.Timestamp)
	}
	// The intermediates: JCS(card) | timestamp, and its hash.
	canon, err := snap.Canonicalize(sc.Card)
	if err != nil {
		t.Fatal(err)
	}
	input := string(canon) + "|" + fmt.Sprint(sc.Timestamp)
	if input != ctVectorInput {
		t.Errorf("signature input\n got  %s\n want %s", input, ctVectorInput)
	}
	if h := sha256.Sum256([]byte(input)); hex.EncodeToString(h[:]) != ctVectorSHA256 {
		t.Errorf("sha256 %x, want %s", h, ctVectorSHA256)
	}

	card, got, err := snap.VerifySignedCard(ctDoc(t, sc))
	if err != nil {
		t.Fatalf("VerifySignedCard: %v", err)
	}
	if card.Name != "Echo" || card.Identity != ctVectorIdentity || got.Sig != ctVectorSig {
		t.Errorf("verified card %+v, doc %+v", card, got)
	}

	// The document as the SDK serves it, with the card's members in the
	// vector's order (not JCS order), verifies too: the signature covers
	// the canonical form.
	doc := []byte(`{"card":` + ctVectorCard + `,"sig":"` + ctVectorSig + `","publicKey":"` + ctVectorPublicKey + `","timestamp":1738627200}`)
	if _, _, err := snap.VerifySignedCard(doc); err != nil {
		t.Fatalf("VerifySignedCard of the appendix text: %v", err)
	}

	// A random-aux signature differs and verifies.
	sc2, err := snap.SignCard(c, ctKeyA, time.Unix(ctVectorTime, 0))
	if err != nil {
		t.Fatal(err)
	}
	if sc2.Sig == ctVectorSig {
		t.Error("SignCard used zero aux")
	}
	if _, _, err := snap.VerifySignedCard(ctDoc(t, sc2)); err != nil {
		t.Errorf("random-aux card: %v", err)
	}

	// SignCard refuses a key that is not the card's identity.
	if _, err := snap.SignCard(c, ctKeyB, time.Unix(ctVectorTime, 0)); !errors.Is(err, snap.ErrWrongKey) {
		t.Errorf("SignCard with another key = %v, want ErrWrongKey", err)
	}
}

func TestSignedCardRejections(t *testing.T) {
	good, err := snap.SignCardWithAux(ctVectorCardValue(), ctKeyA, time.Unix(ctVectorTime, 0), [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	cardB := ctVectorCardValue()
	cardB.Identity = ctKeyB.Address(identity.Mainnet)
	rawB, _ := json.Marshal(cardB)
	rawA, _ := json.Marshal(ctVectorCardValue())

	cases := []struct {
		name  string
		doc   func(t *testing.T) []byte
		code  snap.Code
		field string
	}{
		{"tampered card", func(t *testing.T) []byte {
			sc := *good
			sc.Card = bytes.Replace(sc.Card, []byte(`"Echo agent"`), []byte(`"Evil agent"`), 1)
			return ctDoc(t, &sc)
		}, snap.CodeSignatureInvalid, "sig"},
		{"tampered timestamp", func(t *testing.T) []byte {
			sc := *good
			sc.Timestamp++
			return ctDoc(t, &sc)
		}, snap.CodeSignatureInvalid, "sig"},
		{"tampered sig", func(t *testing.T) []byte {
			sc := *good
			sc.Sig = "00" + sc.Sig[2:]
			return ctDoc(t, &sc)
		}, snap.CodeSignatureInvalid, "sig"},
		{"publicKey of B with a signature by A", func(t *testing.T) []byte {
			sc := *good
			q := ctKeyB.OutputKey()
			sc.PublicKey = hex.EncodeToString(q[:])
			return ctDoc(t, &sc)
		}, snap.CodeSignatureInvalid, "sig"},
		{"card of A signed by B with B's publicKey", func(t *testing.T) []byte {
			return ctDoc(t, ctSignRaw(t, rawA, ctKeyB, ctVectorTime))
		}, snap.CodeIdentityMismatch, ""},
		{"card of B served with A's signature and key", func(t *testing.T) []byte {
			return ctDoc(t, ctSignRaw(t, rawB, ctKeyA, ctVectorTime))
		}, snap.CodeIdentityMismatch, ""},
		{"invalid card: empty name", func(t *testing.T) []byte {
			sc := *good
			sc.Card = bytes.Replace(sc.Card, []byte(`"name":"Echo"`), []byte(`"name":""`), 1)
			return ctDoc(t, &sc)
		}, snap.CodeAgentCardInvalid, "name"},
		{"invalid card: checksum-invalid identity", func(t *testing.T) []byte {
			sc := *good
			sc.Card = bytes.Replace(sc.Card, []byte("gse397"), []byte("gse398"), 1)
			return ctDoc(t, &sc)
		}, snap.CodeAgentCardInvalid, "identity"},
		{"invalid card: not an object", func(t *testing.T) []byte {
			sc := *good
			sc.Card = json.RawMessage(`[]`)
			return ctDoc(t, &sc)
		}, snap.CodeAgentCardInvalid, "card"},
		{"sig missing", func(t *testing.T) []byte {
			return []byte(`{"card":` + string(good.Card) + `,"publicKey":"` + good.PublicKey + `","timestamp":1738627200}`)
		}, snap.CodeAgentCardInvalid, "sig"},
		{"sig uppercase", func(t *testing.T) []byte {
			sc := *good
			sc.Sig = strings.ToUpper(sc.Sig)
			return ctDoc(t, &sc)
		}, snap.CodeAgentCardInvalid, "sig"},
		{"publicKey of 63 characters", func(t *testing.T) []byte {
			sc := *good
			sc.PublicKey = sc.PublicKey[:63]
			return ctDoc(t, &sc)
		}, snap.CodeAgentCardInvalid, "publicKey"},
		{"publicKey not on the curve", func(t *testing.T) []byte {
			sc := *good
			sc.PublicKey = strings.Repeat("0", 64)
			return ctDoc(t, &sc)
		}, snap.CodeAgentCardInvalid, "publicKey"},
		{"timestamp fractional", func(t *testing.T) []byte {
			return bytes.Replace(ctDoc(t, good), []byte(`"timestamp":1738627200`), []byte(`"timestamp":1738627200.5`), 1)
		}, snap.CodeAgentCardInvalid, "timestamp"},
		{"timestamp missing", func(t *testing.T) []byte {
			return bytes.Replace(ctDoc(t, good), []byte(`,"timestamp":1738627200`), nil, 1)
		}, snap.CodeAgentCardInvalid, "timestamp"},
		{"card missing", func(t *testing.T) []byte {
			return []byte(`{"sig":"` + good.Sig + `","publicKey":"` + good.PublicKey + `","timestamp":1738627200}`)
		}, snap.CodeAgentCardInvalid, "card"},
		{"duplicate member in the document", func(t *testing.T) []byte {
			return bytes.Replace(ctDoc(t, good), []byte(`"timestamp":1738627200`), []byte(`"timestamp":1738627200,"timestamp":1738627200`), 1)
		}, snap.CodeAgentCardInvalid, "signedCard"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := snap.VerifySignedCard(c.doc(t))
			se := ctError(t, err, c.code, c.field)
			if c.code == snap.CodeIdentityMismatch {
				for _, k := range []string{"from", "signer"} {
					if _, ok := se.Data[k]; !ok {
						t.Errorf("data has no %q: %v", k, se)
					}
				}
			}
		})
	}
}

// ctBaseCard is a valid card with one of every optional part, so that each
// limit case changes one thing.
func ctBaseCard() *snap.Card {
	return &snap.Card{
		Name: "Echo", Description: "Echo agent", Version: "1.0.0", Identity: ctVectorIdentity,
		Endpoints:   []snap.Endpoint{{Protocol: "http", URL: "https://agent.example.com/snap"}},
		NostrRelays: []string{"wss://relay.example.com"},
		Skills: []snap.Skill{{ID: "echo", Name: "Echo", Description: "Echoes", Tags: []string{"test"},
			Examples: []string{"say hi"}}},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
	}
}

func ctRepeat(n int, f func(i int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

func ctSkills(n int) []snap.Skill {
	out := make([]snap.Skill, n)
	for i := range out {
		out[i] = snap.Skill{ID: fmt.Sprintf("skill-%d", i), Name: "S", Description: "D", Tags: []string{"t"}}
	}
	return out
}

func ctEndpoints(n int) []snap.Endpoint {
	out := make([]snap.Endpoint, n)
	for i := range out {
		out[i] = snap.Endpoint{Protocol: "wss", URL: fmt.Sprintf("wss://e%d.example.com/snap", i)}
	}
	return out
}

// ctSizedCard returns a valid card whose JSON form is exactly size bytes
// (size must be above a few kilobytes), grown with skills of long
// descriptions.
func ctSizedCard(t *testing.T, size int) *snap.Card {
	t.Helper()
	c := ctBaseCard()
	c.Skills = nil
	for i := 0; ; i++ {
		c.Skills = append(c.Skills, snap.Skill{ID: fmt.Sprintf("s%d", i), Name: "S",
			Description: strings.Repeat("d", 1024), Tags: []string{"t"}})
		b, _ := json.Marshal(c)
		if over := len(b) - size; over >= 0 {
			last := &c.Skills[len(c.Skills)-1]
			last.Description = last.Description[:1024-over]
			break
		}
	}
	b, _ := json.Marshal(c)
	if len(b) != size {
		t.Fatalf("card of %d bytes, want %d", len(b), size)
	}
	return c
}

func TestCardLimits(t *testing.T) {
	cases := []struct {
		name       string
		edit       func(t *testing.T, c *snap.Card) *snap.Card
		field      string // "" when the card is valid
		constraint string
	}{
		{"base card", func(t *testing.T, c *snap.Card) *snap.Card { return c }, "", ""},
		{"name of 128 characters", func(t *testing.T, c *snap.Card) *snap.Card { c.Name = strings.Repeat("n", 128); return c }, "", ""},
		{"name of 128 two-byte characters", func(t *testing.T, c *snap.Card) *snap.Card { c.Name = strings.Repeat("é", 128); return c }, "", ""},
		{"name of 129 characters", func(t *testing.T, c *snap.Card) *snap.Card { c.Name = strings.Repeat("n", 129); return c }, "name", "maxLength"},
		{"name empty", func(t *testing.T, c *snap.Card) *snap.Card { c.Name = ""; return c }, "name", "minLength"},
		{"description of 1024 characters", func(t *testing.T, c *snap.Card) *snap.Card { c.Description = strings.Repeat("d", 1024); return c }, "", ""},
		{"description of 1025 characters", func(t *testing.T, c *snap.Card) *snap.Card { c.Description = strings.Repeat("d", 1025); return c }, "description", "maxLength"},
		{"description empty", func(t *testing.T, c *snap.Card) *snap.Card { c.Description = ""; return c }, "description", "minLength"},
		{"version not semver", func(t *testing.T, c *snap.Card) *snap.Card { c.Version = "1.0"; return c }, "version", "pattern"},
		{"version with a pre-release", func(t *testing.T, c *snap.Card) *snap.Card { c.Version = "1.0.0-beta"; return c }, "version", "pattern"},
		{"identity with a bad checksum", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Identity = ctVectorIdentity[:61] + "8"
			return c
		}, "identity", "p2tr"},
		{"identity a P2WSH address", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Identity = "bc1q9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsz8ecaz"
			return c
		}, "identity", "p2tr"},
		{"identity whose program is not on the curve", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Identity = "bc1pqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqpqqenm"
			return c
		}, "identity", "p2tr"},
		{"testnet identity", func(t *testing.T, c *snap.Card) *snap.Card { c.Identity = ctKeyA.Address(identity.Testnet); return c }, "", ""},
		{"skills 0", func(t *testing.T, c *snap.Card) *snap.Card { c.Skills = []snap.Skill{}; return c }, "skills", "minItems"},
		{"skills 100", func(t *testing.T, c *snap.Card) *snap.Card { c.Skills = ctSkills(100); return c }, "", ""},
		{"skills 101", func(t *testing.T, c *snap.Card) *snap.Card { c.Skills = ctSkills(101); return c }, "skills", "maxItems"},
		{"skill id uppercase", func(t *testing.T, c *snap.Card) *snap.Card { c.Skills[0].ID = "Echo"; return c }, "skills[0].id", "pattern"},
		{"skill id with underscore", func(t *testing.T, c *snap.Card) *snap.Card { c.Skills[0].ID = "echo_all"; return c }, "skills[0].id", "pattern"},
		{"skill id of 64 characters", func(t *testing.T, c *snap.Card) *snap.Card { c.Skills[0].ID = strings.Repeat("e", 64); return c }, "", ""},
		{"skill id of 65 characters", func(t *testing.T, c *snap.Card) *snap.Card { c.Skills[0].ID = strings.Repeat("e", 65); return c }, "skills[0].id", "maxLength"},
		{"duplicate skill ids", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Skills = append(c.Skills, snap.Skill{ID: "echo", Name: "Again", Description: "D", Tags: []string{"t"}})
			return c
		}, "skills[1].id", "unique"},
		{"skill name empty", func(t *testing.T, c *snap.Card) *snap.Card { c.Skills[0].Name = ""; return c }, "skills[0].name", "minLength"},
		{"skill description of 1025 characters", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Skills[0].Description = strings.Repeat("d", 1025)
			return c
		}, "skills[0].description", "maxLength"},
		{"tags 0", func(t *testing.T, c *snap.Card) *snap.Card { c.Skills[0].Tags = []string{}; return c }, "skills[0].tags", "minItems"},
		{"tags 20", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Skills[0].Tags = ctRepeat(20, func(i int) string { return fmt.Sprintf("t%d", i) })
			return c
		}, "", ""},
		{"tags 21", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Skills[0].Tags = ctRepeat(21, func(i int) string { return fmt.Sprintf("t%d", i) })
			return c
		}, "skills[0].tags", "maxItems"},
		{"tag of 32 characters", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Skills[0].Tags = []string{strings.Repeat("t", 32)}
			return c
		}, "", ""},
		{"tag of 33 characters", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Skills[0].Tags = []string{strings.Repeat("t", 33)}
			return c
		}, "skills[0].tags[0]", "maxLength"},
		{"tag empty", func(t *testing.T, c *snap.Card) *snap.Card { c.Skills[0].Tags = []string{"ok", ""}; return c }, "skills[0].tags[1]", "minLength"},
		{"tag uppercase", func(t *testing.T, c *snap.Card) *snap.Card { c.Skills[0].Tags = []string{"Test"}; return c }, "skills[0].tags[0]", "pattern"},
		{"examples 10", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Skills[0].Examples = ctRepeat(10, func(i int) string { return "e" })
			return c
		}, "", ""},
		{"examples 11", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Skills[0].Examples = ctRepeat(11, func(i int) string { return "e" })
			return c
		}, "skills[0].examples", "maxItems"},
		{"example of 256 characters", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Skills[0].Examples = []string{strings.Repeat("x", 256)}
			return c
		}, "", ""},
		{"example of 257 characters", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Skills[0].Examples = []string{strings.Repeat("x", 257)}
			return c
		}, "skills[0].examples[0]", "maxLength"},
		{"skill inputModes 21", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Skills[0].InputModes = ctRepeat(21, func(i int) string { return "text/plain" })
			return c
		}, "skills[0].inputModes", "maxItems"},
		{"skill outputModes bad media type", func(t *testing.T, c *snap.Card) *snap.Card { c.Skills[0].OutputModes = []string{"json"}; return c }, "skills[0].outputModes[0]", "format"},
		{"defaultInputModes 0", func(t *testing.T, c *snap.Card) *snap.Card { c.DefaultInputModes = []string{}; return c }, "defaultInputModes", "minItems"},
		{"defaultInputModes 20", func(t *testing.T, c *snap.Card) *snap.Card {
			c.DefaultInputModes = ctRepeat(20, func(i int) string { return "text/plain" })
			return c
		}, "", ""},
		{"defaultInputModes 21", func(t *testing.T, c *snap.Card) *snap.Card {
			c.DefaultInputModes = ctRepeat(21, func(i int) string { return "text/plain" })
			return c
		}, "defaultInputModes", "maxItems"},
		{"defaultOutputModes 0", func(t *testing.T, c *snap.Card) *snap.Card { c.DefaultOutputModes = []string{}; return c }, "defaultOutputModes", "minItems"},
		{"defaultOutputModes 21", func(t *testing.T, c *snap.Card) *snap.Card {
			c.DefaultOutputModes = ctRepeat(21, func(i int) string { return "application/json" })
			return c
		}, "defaultOutputModes", "maxItems"},
		{"media type without a slash", func(t *testing.T, c *snap.Card) *snap.Card { c.DefaultInputModes = []string{"text"}; return c }, "defaultInputModes[0]", "format"},
		{"media type uppercase", func(t *testing.T, c *snap.Card) *snap.Card {
			c.DefaultOutputModes = []string{"text/plain", "Text/Plain"}
			return c
		}, "", ""},
		{"media type with parameters", func(t *testing.T, c *snap.Card) *snap.Card {
			c.DefaultInputModes = []string{"text/plain; charset=utf-8"}
			return c
		}, "", ""},
		{"media type with a bad parameter", func(t *testing.T, c *snap.Card) *snap.Card {
			c.DefaultInputModes = []string{"text/plain", "text/plain; charset"}
			return c
		}, "defaultInputModes[1]", "format"},
		{"media type of 129 characters", func(t *testing.T, c *snap.Card) *snap.Card {
			c.DefaultInputModes = []string{"application/" + strings.Repeat("x", 117)}
			return c
		}, "defaultInputModes[0]", "format"},
		{"media type of 128 characters", func(t *testing.T, c *snap.Card) *snap.Card {
			c.DefaultInputModes = []string{"application/" + strings.Repeat("x", 116)}
			return c
		}, "", ""},
		{"endpoints 10", func(t *testing.T, c *snap.Card) *snap.Card { c.Endpoints = ctEndpoints(10); return c }, "", ""},
		{"endpoints 11", func(t *testing.T, c *snap.Card) *snap.Card { c.Endpoints = ctEndpoints(11); return c }, "endpoints", "maxItems"},
		{"endpoint protocol grpc", func(t *testing.T, c *snap.Card) *snap.Card { c.Endpoints[0].Protocol = "grpc"; return c }, "endpoints[0].protocol", "enum"},
		{"endpoint protocol ws", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Endpoints = append(c.Endpoints, snap.Endpoint{Protocol: "ws", URL: "ws://agent.example.com/snap"})
			return c
		}, "endpoints[1].protocol", "enum"},
		{"endpoint url not absolute", func(t *testing.T, c *snap.Card) *snap.Card { c.Endpoints[0].URL = "/snap"; return c }, "endpoints[0].url", "format"},
		{"endpoint url of another scheme", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Endpoints[0].URL = "ftp://agent.example.com/snap"
			return c
		}, "endpoints[0].url", "format"},
		{"endpoint url over 2048 characters", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Endpoints[0].URL = "https://agent.example.com/" + strings.Repeat("p", 2048)
			return c
		}, "endpoints[0].url", "maxLength"},
		{"nostrRelays ws:// on a public host", func(t *testing.T, c *snap.Card) *snap.Card {
			c.NostrRelays = []string{"ws://relay.example.com"}
			return c
		}, "nostrRelays[0]", "pattern"},
		{"nostrRelays ws:// on a private address", func(t *testing.T, c *snap.Card) *snap.Card { c.NostrRelays = []string{"ws://10.0.0.1:7777"}; return c }, "nostrRelays[0]", "pattern"},
		{"nostrRelays ws://127.0.0.1", func(t *testing.T, c *snap.Card) *snap.Card { c.NostrRelays = []string{"ws://127.0.0.1:7777"}; return c }, "", ""},
		{"nostrRelays ws://localhost", func(t *testing.T, c *snap.Card) *snap.Card { c.NostrRelays = []string{"ws://localhost:7777"}; return c }, "", ""},
		{"nostrRelays ws://[::1]", func(t *testing.T, c *snap.Card) *snap.Card { c.NostrRelays = []string{"ws://[::1]:7777"}; return c }, "", ""},
		{"nostrRelays https://", func(t *testing.T, c *snap.Card) *snap.Card {
			c.NostrRelays = []string{"wss://relay.example.com", "https://relay.example.com"}
			return c
		}, "nostrRelays[1]", "pattern"},
		{"nostrRelays 10", func(t *testing.T, c *snap.Card) *snap.Card {
			c.NostrRelays = ctRepeat(10, func(i int) string { return fmt.Sprintf("wss://r%d.example.com", i) })
			return c
		}, "", ""},
		{"nostrRelays 11", func(t *testing.T, c *snap.Card) *snap.Card {
			c.NostrRelays = ctRepeat(11, func(i int) string { return fmt.Sprintf("wss://r%d.example.com", i) })
			return c
		}, "nostrRelays", "maxItems"},
		{"protocolVersion not major.minor", func(t *testing.T, c *snap.Card) *snap.Card { c.ProtocolVersion = "0.1.0"; return c }, "protocolVersion", "pattern"},
		{"supportedVersions entry bad", func(t *testing.T, c *snap.Card) *snap.Card { c.SupportedVersions = []string{"0.1", "v1"}; return c }, "supportedVersions[1]", "pattern"},
		{"supportedVersions 21", func(t *testing.T, c *snap.Card) *snap.Card {
			c.SupportedVersions = ctRepeat(21, func(i int) string { return fmt.Sprintf("0.%d", i) })
			return c
		}, "supportedVersions", "maxItems"},
		{"rateLimit maxRequests 0", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Capabilities = &snap.Capabilities{RateLimit: &snap.RateLimit{MaxRequests: 0, WindowSeconds: 60}}
			return c
		}, "capabilities.rateLimit.maxRequests", "minimum"},
		{"trust domain of 254 characters", func(t *testing.T, c *snap.Card) *snap.Card {
			c.Trust = &snap.Trust{Domain: strings.Repeat("a", 254)}
			return c
		}, "trust.domain", "maxLength"},
		{"iconUrl relative", func(t *testing.T, c *snap.Card) *snap.Card { c.IconURL = "icon.png"; return c }, "iconUrl", "format"},
		{"card of exactly 64 KiB", func(t *testing.T, c *snap.Card) *snap.Card { return ctSizedCard(t, snap.MaxCardSize) }, "", ""},
		{"card of 64 KiB + 1 byte", func(t *testing.T, c *snap.Card) *snap.Card { return ctSizedCard(t, snap.MaxCardSize+1) }, "card", "maxSize"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			card := c.edit(t, ctBaseCard())
			raw, err := json.Marshal(card)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, err error) {
				t.Helper()
				if c.field == "" {
					if err != nil {
						t.Errorf("%s = %v, want accepted", what, err)
					}
					return
				}
				var se *snap.Error
				if !errors.As(err, &se) {
					t.Fatalf("%s = %v, want 3002 field %q", what, err, c.field)
				}
				if se.Code != snap.CodeAgentCardInvalid || se.Field() != c.field || se.Data["constraint"] != c.constraint {
					t.Errorf("%s = %v, want 3002 field %q constraint %q", what, se, c.field, c.constraint)
				}
				for _, k := range []string{"field", "constraint", "expected", "received"} {
					if _, ok := se.Data[k]; !ok {
						t.Errorf("%s: data has no %q", what, k)
					}
				}
			}
			check("Validate", card.Validate())
			_, err = snap.ParseCard(raw)
			check("ParseCard", err)
			// A valid card signs and verifies; an invalid one does not
			// sign.
			sc, err := snap.SignCard(card, ctKeyA, time.Unix(ctVectorTime, 0))
			if c.field == "" {
				if err != nil {
					t.Fatalf("SignCard: %v", err)
				}
				if _, _, err := snap.VerifySignedCard(ctDoc(t, sc)); err != nil {
					t.Errorf("VerifySignedCard: %v", err)
				}
			} else {
				check("SignCard", err)
			}
		})
	}
}

// Rules only a raw document can break: required members, JSON types,
// empty optional arrays, I-JSON, and the size of the text as received.
func TestParseCardRaw(t *testing.T) {
	base, _ := json.Marshal(ctBaseCard())
	del := func(name string) []byte {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(base, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, name)
		b, _ := json.Marshal(m)
		return b
	}
	set := func(name, v string) []byte {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(base, &m); err != nil {
			t.Fatal(err)
		}
		m[name] = json.RawMessage(v)
		b, _ := json.Marshal(m)
		return b
	}
	cases := []struct {
		name       string
		raw        []byte
		field      string
		constraint string
	}{
		{"base", base, "", ""},
		{"unknown members are ignored", set("x-extra", `{"a":1}`), "", ""},
		{"unknown member without x- is ignored", set("customField", `"v"`), "", ""},
		{"name missing", del("name"), "name", "required"},
		{"description missing", del("description"), "description", "required"},
		{"version missing", del("version"), "version", "required"},
		{"identity missing", del("identity"), "identity", "required"},
		{"skills missing", del("skills"), "skills", "required"},
		{"defaultInputModes missing", del("defaultInputModes"), "defaultInputModes", "required"},
		{"defaultOutputModes missing", del("defaultOutputModes"), "defaultOutputModes", "required"},
		{"endpoints empty", set("endpoints", `[]`), "endpoints", "minItems"},
		{"nostrRelays empty", set("nostrRelays", `[]`), "nostrRelays", "minItems"},
		{"supportedVersions empty", set("supportedVersions", `[]`), "supportedVersions", "minItems"},
		{"name a number", set("name", `5`), "name", "type"},
		{"skills an object", set("skills", `{}`), "skills", "type"},
		{"not an object", []byte(`["card"]`), "card", "type"},
		{"not JSON", []byte(`{"name":`), "card", "i-json"},
		{"duplicate member", bytes.Join([][]byte{bytes.TrimSuffix(base, []byte("}")), []byte(`,"name":"Other"}`)}, nil), "card", "i-json"},
		{"lone surrogate", set("description", `"\ud800"`), "card", "i-json"},
		{"over 64 KiB with whitespace", bytes.Join([][]byte{base, bytes.Repeat([]byte(" "), snap.MaxCardSize)}, nil), "card", "maxSize"},
		// The schema gives every field a type and null is none of them:
		// decoded, a null would read as a field left out.
		{"endpoints null", set("endpoints", `null`), "endpoints", "type"},
		{"iconUrl null", set("iconUrl", `null`), "iconUrl", "type"},
		{"protocolVersion null", set("protocolVersion", `null`), "protocolVersion", "type"},
		{"trust null", set("trust", `null`), "trust", "type"},
		{"capabilities null", set("capabilities", `null`), "capabilities", "type"},
		{"capabilities.streaming null", set("capabilities", `{"streaming":null}`), "capabilities.streaming", "type"},
		{"provider.url null", set("provider", `{"url":null}`), "provider.url", "type"},
		{"skill examples null", set("skills", `[{"id":"echo","name":"Echo","description":"Echoes","tags":["test"],"examples":null}]`), "skills[0].examples", "type"},
		{"skill example null", set("skills", `[{"id":"echo","name":"Echo","description":"Echoes","tags":["test"],"examples":[null]}]`), "skills[0].examples[0]", "type"},
		{"null in an unknown member is ignored", set("x-extra", `{"a":null}`), "", ""},
		{"null in a skill's unknown member is ignored", set("skills", `[{"id":"echo","name":"Echo","description":"Echoes","tags":["test"],"x-n":null}]`), "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := snap.ParseCard(c.raw)
			if c.field == "" {
				if err != nil {
					t.Fatalf("ParseCard = %v, want accepted", err)
				}
				return
			}
			se := ctError(t, err, snap.CodeAgentCardInvalid, c.field)
			if se.Data["constraint"] != c.constraint {
				t.Errorf("constraint %v, want %q", se.Data["constraint"], c.constraint)
			}
		})
	}
}
