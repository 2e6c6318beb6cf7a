package snap_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// payload1KiB is a message/send payload sized so that the whole signed
// message is 1 KiB serialized.
func payload1KiB(tb testing.TB) []byte {
	tb.Helper()
	p := map[string]any{"message": map[string]any{
		"messageId": "inner-0001", "role": "user",
		"parts": []any{map[string]any{"text": ""}},
	}}
	b, _ := json.Marshal(p)
	text := strings.Repeat("Write a login form in React. ", 40)[:1024-len(b)-415]
	p["message"].(map[string]any)["parts"] = []any{map[string]any{"text": text}}
	b, err := json.Marshal(p)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func message1KiB(tb testing.TB) *snap.Message {
	return &snap.Message{
		ID: "0b4e8a1c-2f6d-4c3e-9a7b-5d1e2f3a4b5c", Version: "0.1", Type: snap.TypeRequest, Method: "message/send",
		From: keyA.Address(identity.Mainnet), To: keyB.Address(identity.Mainnet),
		Payload: payload1KiB(tb), Timestamp: t0,
	}
}

// BenchmarkVerifyMessage is the whole inbound path of a 1 KiB message/send:
// parse, every validation stage, canonicalization and BIP-340
// verification. The sender's address is decoded once (the key cache), as
// for any returning peer.
func BenchmarkVerifyMessage(b *testing.B) {
	m := message1KiB(b)
	if err := m.Sign(keyA); err != nil {
		b.Fatal(err)
	}
	raw, _ := m.MarshalJSON()
	b.Logf("message size: %d bytes", len(raw))
	v := snap.NewValidator(snap.Config{Now: at(t0), Self: keyB.Address(identity.Mainnet)})
	ctx := context.Background()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Validate(ctx, raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSchnorrVerifyRaw is the baseline of BenchmarkVerifyMessage:
// btcec's BIP-340 verification alone, key and signature already parsed.
func BenchmarkSchnorrVerifyRaw(b *testing.B) {
	q := keyA.OutputKey()
	pub, err := schnorr.ParsePubKey(q[:])
	if err != nil {
		b.Fatal(err)
	}
	d := sha256.Sum256([]byte("baseline"))
	s, _ := keyA.Sign(d)
	sig, err := schnorr.ParseSignature(s[:])
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !sig.Verify(d[:], pub) {
			b.Fatal("verify failed")
		}
	}
}

// BenchmarkSignMessage is the outbound path: canonicalize a 1 KiB payload
// once, hash the signature input, sign with the tweaked key and serialize.
func BenchmarkSignMessage(b *testing.B) {
	m := message1KiB(b)
	payload := m.Payload
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		m.Payload = payload // as a handler hands it over: not yet canonical
		if err := m.Sign(keyA); err != nil {
			b.Fatal(err)
		}
		var err error
		if buf, err = m.AppendJSON(buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSchnorrSignRaw is the baseline of BenchmarkSignMessage: btcec's
// fast BIP-340 signing (no self-verification) with fresh auxiliary data.
func BenchmarkSchnorrSignRaw(b *testing.B) {
	priv, _ := btcec.PrivKeyFromBytes([]byte(strings.Repeat("\x0a", 32)))
	d := sha256.Sum256([]byte("baseline"))
	var aux [32]byte
	b.ReportAllocs()
	for b.Loop() {
		aux[0]++
		if _, err := schnorr.Sign(priv, d[:], schnorr.FastSign(), schnorr.CustomNonce(aux)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCanonicalize1KiB is the JCS step alone.
func BenchmarkCanonicalize1KiB(b *testing.B) {
	p := payload1KiB(b)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := snap.Canonicalize(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParse1KiB is every stateless stage (syntax to semantics)
// without the key cache: two bech32m decodes and two lift_x included.
func BenchmarkParse1KiB(b *testing.B) {
	m := message1KiB(b)
	if err := m.Sign(keyA); err != nil {
		b.Fatal(err)
	}
	raw, _ := m.MarshalJSON()
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := snap.Parse(raw); err != nil {
			b.Fatal(err)
		}
	}
}
