package snap_test

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/snapref"
	"github.com/snapnode/snapnode/snap"
)

// at returns a clock fixed at Unix second ts.
func at(ts int64) func() time.Time { return func() time.Time { return time.Unix(ts, 0) } }

func TestReferenceCanonical(t *testing.T) {
	var vs snapref.CanonicalVectors
	snapref.Load(t, "canonical/jcs-payloads.json", &vs)
	if len(vs.Vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range vs.Vectors {
		t.Run(v.Description, func(t *testing.T) {
			got, err := snap.Canonicalize(v.Input)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != v.Expected {
				t.Errorf("got  %s\nwant %s", got, v.Expected)
			}
		})
	}
}

func TestReferenceSignatures(t *testing.T) {
	var vs snapref.SignatureVectors
	snapref.Load(t, "signatures/schnorr-signatures.json", &vs)
	if len(vs.Valid) == 0 || len(vs.Invalid) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range vs.Valid {
		t.Run(v.Description, func(t *testing.T) {
			// The vectors are unsigned messages; every stateless stage
			// must accept them.
			m, err := snap.Parse(v.Message)
			if err != nil {
				t.Fatal(err)
			}
			if string(m.Payload) != v.Intermediates.CanonicalPayload {
				t.Errorf("canonical payload\n got  %s\n want %s", m.Payload, v.Intermediates.CanonicalPayload)
			}
			in, err := m.SignatureInput()
			if err != nil {
				t.Fatal(err)
			}
			if string(in) != v.Intermediates.SignatureInput {
				t.Errorf("signature input\n got  %q\n want %q", in, v.Intermediates.SignatureInput)
			}
			if got := hex.EncodeToString(in); got != v.Intermediates.SignatureInputHex {
				t.Errorf("signature input hex differs")
			}
			d, err := m.Digest()
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(d[:]); got != v.Intermediates.SHA256Hash {
				t.Errorf("digest %s, want %s", got, v.Intermediates.SHA256Hash)
			}
			k, err := identity.FromHex(v.PrivateKey)
			if err != nil {
				t.Fatal(err)
			}
			if q := k.OutputKey(); hex.EncodeToString(q[:]) != v.TweakedPublicKey {
				t.Errorf("tweaked key differs")
			}
			if err := m.SignWithAux(k, [32]byte{}); err != nil {
				t.Fatal(err)
			}
			if m.Sig != v.ExpectedSignature {
				t.Errorf("signature\n got  %s\n want %s", m.Sig, v.ExpectedSignature)
			}
			// The signed message verifies with the vector's own time.
			raw, err := m.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			val := snap.NewValidator(snap.Config{Now: at(m.Timestamp)})
			got, err := val.Validate(context.Background(), raw)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !got.Signed {
				t.Error("Signed = false for a signed message")
			}
			// A random-aux signature differs and verifies too.
			m2, _ := snap.Parse(v.Message)
			if err := m2.Sign(k); err != nil {
				t.Fatal(err)
			}
			raw2, _ := m2.MarshalJSON()
			if _, err := val.Validate(context.Background(), raw2); err != nil {
				t.Errorf("random-aux signature does not verify: %v", err)
			}
		})
	}
	for _, v := range vs.Invalid {
		t.Run(v.Description, func(t *testing.T) {
			m, err := snap.Parse(v.Message)
			if err != nil {
				t.Fatal(err)
			}
			m.Sig = v.Signature
			raw, _ := m.MarshalJSON()
			val := snap.NewValidator(snap.Config{Now: at(m.Timestamp)})
			_, err = val.Validate(context.Background(), raw)
			if !errors.Is(err, snap.CodeSignatureInvalid) {
				t.Fatalf("Validate = %v, want 2001", err)
			}
		})
	}
}

// A supplementary vector made with the reference SDK 0.5.0 (zero aux_rand;
// not an official one): service/call without to.
func TestSupplementaryServiceCallWithoutTo(t *testing.T) {
	raw := []byte(`{"id":"svc-001","version":"0.1","from":"bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397",
 "type":"request","method":"service/call","payload":{"name":"query_database","arguments":{"sql":"SELECT 1"}},
 "timestamp":1738627200}`)
	m, err := snap.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(m.Payload); got != `{"arguments":{"sql":"SELECT 1"},"name":"query_database"}` {
		t.Errorf("canonical payload %s", got)
	}
	in, _ := m.SignatureInput()
	const wantHex = "7376632d3030310062633170397672356e7a667268686e746a61756c6d65723032767964617336306765387372793536376b6d7868636330633073747871677367736533393700007265717565737400736572766963652f63616c6c007b22617267756d656e7473223a7b2273716c223a2253454c4543542031227d2c226e616d65223a2271756572795f6461746162617365227d0031373338363237323030"
	if hex.EncodeToString(in) != wantHex {
		t.Errorf("signature input %x", in)
	}
	d, _ := m.Digest()
	if hex.EncodeToString(d[:]) != "c24079d6bad1d68f4a3778a80f4d43e85f11ee363965b986ea28d6baf7cbe867" {
		t.Errorf("digest %x", d)
	}
	k, _ := identity.FromHex(strings.Repeat("0a", 32))
	if err := m.SignWithAux(k, [32]byte{}); err != nil {
		t.Fatal(err)
	}
	if m.Sig != "7375bbcc863f426012e22e499c7345407e32aa995370bcc719ac4907098293f28261877363d15459b9764fcabc5f152d6e844f43134a2fc36e4ced4d84302819" {
		t.Errorf("signature %s", m.Sig)
	}
	out, _ := m.MarshalJSON()
	if strings.Contains(string(out), `"to"`) {
		t.Errorf("absent to was written: %s", out)
	}
	if _, err := snap.NewValidator(snap.Config{Now: at(1738627200)}).Validate(context.Background(), out); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// A supplementary vector: JCS numbers and strings as npm canonicalize (the
// reference SDK's JCS) writes them.
func TestSupplementaryCanonicalNumbers(t *testing.T) {
	got, err := snap.Canonicalize([]byte(`{"b":1e21,"a":12345678901234567890,"c":0.1,"d":-0,"e":1.0,"f":"\u00e9\u2028\u001f"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"a\":12345678901234567000,\"b\":1e+21,\"c\":0.1,\"d\":0,\"e\":1,\"f\":\"é\u2028\\u001f\"}"
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
