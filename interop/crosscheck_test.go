package interop

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip44"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/jsinterop"
	"github.com/snapnode/snapnode/internal/snapref"
	"github.com/snapnode/snapnode/snap"
)

// testCtx returns a context that ends with the test, bounded to d.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// runJS runs client.mjs, requires exit code want, and decodes its single
// output line into v (when v is not nil).
func runJS(t *testing.T, want int, v any, args ...string) []byte {
	t.Helper()
	return runJSInput(t, nil, want, v, args...)
}

func runJSInput(t *testing.T, stdin []byte, want int, v any, args ...string) []byte {
	t.Helper()
	out, code := jsinterop.RunInput(t, testCtx(t, time.Minute), stdin, args...)
	if code != want {
		t.Fatalf("client.mjs %s: exit %d, want %d; stdout: %s", args[0], code, want, clip(out))
	}
	if v != nil {
		if err := json.Unmarshal(bytes.TrimSpace(out), v); err != nil {
			t.Fatalf("client.mjs %s: output is not one JSON value: %v: %s", args[0], err, clip(out))
		}
	}
	return out
}

// clip shortens process output for a failure message.
func clip(b []byte) string {
	if len(b) > 2000 {
		return string(b[:1000]) + fmt.Sprintf(" …(%d bytes)… ", len(b)-2000) + string(b[len(b)-1000:])
	}
	return string(b)
}

func init() {
	// go-nostr logs every event its filter drops; the live-filter test
	// provokes that on purpose.
	nostr.InfoLogger = log.New(io.Discard, "", 0)
}

func mustKey(t *testing.T, hexKey string) *identity.Key {
	t.Helper()
	k, err := identity.FromHex(hexKey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newKey(t *testing.T) *identity.Key {
	t.Helper()
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type jsKeys struct {
	Secret         string `json:"secret"`
	InternalKey    string `json:"internalKey"`
	NostrPubkey    string `json:"nostrPubkey"`
	TweakedSecret  string `json:"tweakedSecret"`
	OutputKey      string `json:"outputKey"`
	Address        string `json:"address"`
	TestnetAddress string `json:"testnetAddress"`
}

// TestKeysAgree: the JS derivation (schnorr.getPublicKey, TapTweak,
// bech32m) gives the same P, Q and addresses as identity.Key.
func TestKeysAgree(t *testing.T) {
	jsinterop.Node(t)
	secrets := []string{strings.Repeat("0a", 32), strings.Repeat("0b", 32), strings.Repeat("0c", 32),
		// d = n−1: P has odd y, so the tweak must negate d first.
		"fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140",
		"0000000000000000000000000000000000000000000000000000000000000001"}
	for i := 0; i < 5; i++ {
		secrets = append(secrets, newKey(t).Hex())
	}
	for _, s := range secrets {
		k := mustKey(t, s)
		var js jsKeys
		runJS(t, 0, &js, "keys", "--secret", s)
		p, q := k.InternalKey(), k.OutputKey()
		if js.InternalKey != hex.EncodeToString(p[:]) || js.NostrPubkey != k.NostrPublicKey() {
			t.Errorf("%s: P: js %s, go %x", s, js.InternalKey, p)
		}
		if js.OutputKey != hex.EncodeToString(q[:]) {
			t.Errorf("%s: Q: js %s, go %x", s, js.OutputKey, q)
		}
		if js.Address != k.Address(identity.Mainnet) || js.TestnetAddress != k.Address(identity.Testnet) {
			t.Errorf("%s: addresses: js %s %s, go %s %s", s, js.Address, js.TestnetAddress,
				k.Address(identity.Mainnet), k.Address(identity.Testnet))
		}
	}
	// The published key vectors, through the JS side alone.
	var kv snapref.KeyVectors
	snapref.Load(t, "keys/key-encoding.json", &kv)
	for _, v := range kv.Vectors {
		var js jsKeys
		runJS(t, 0, &js, "keys", "--secret", v.PrivateKey)
		addr := js.Address
		if v.Network == "testnet" {
			addr = js.TestnetAddress
		}
		if js.InternalKey != v.PublicKeyXOnly || js.OutputKey != v.TweakedPublicKey || addr != v.P2TRAddress || js.NostrPubkey != v.NostrPubkeyHex {
			t.Errorf("%s: js %+v does not match the vector", v.Description, js)
		}
	}
}

type jsExplain struct {
	Message           json.RawMessage `json:"message"`
	CanonicalPayload  string          `json:"canonicalPayload"`
	SignatureInputHex string          `json:"signatureInputHex"`
	Digest            string          `json:"digest"`
}

func sigOf(t *testing.T, msg json.RawMessage) string {
	t.Helper()
	var m struct {
		Sig string `json:"sig"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatal(err)
	}
	return m.Sig
}

// TestSignatureVectorsJS: with zero aux the JS signer reproduces every
// published signature byte for byte, with the same canonical payload and
// signature input, and Go accepts what it signed.
func TestSignatureVectorsJS(t *testing.T) {
	jsinterop.Node(t)
	var sv snapref.SignatureVectors
	snapref.Load(t, "signatures/schnorr-signatures.json", &sv)
	if len(sv.Valid) != 7 {
		t.Fatalf("%d valid signature vectors, want 7", len(sv.Valid))
	}
	for _, v := range sv.Valid {
		t.Run(v.Description, func(t *testing.T) {
			var ex jsExplain
			runJS(t, 0, &ex, "sign", "--secret", v.PrivateKey, "--aux", "zero", "--explain", "--message", string(v.Message))
			if got := sigOf(t, ex.Message); got != v.ExpectedSignature {
				t.Errorf("sig:\n js   %s\n want %s", got, v.ExpectedSignature)
			}
			if ex.CanonicalPayload != v.Intermediates.CanonicalPayload {
				t.Errorf("canonical payload: js %q, want %q", ex.CanonicalPayload, v.Intermediates.CanonicalPayload)
			}
			if ex.SignatureInputHex != v.Intermediates.SignatureInputHex {
				t.Errorf("signature input: js %s, want %s", ex.SignatureInputHex, v.Intermediates.SignatureInputHex)
			}
			if ex.Digest != v.Intermediates.SHA256Hash {
				t.Errorf("digest: js %s, want %s", ex.Digest, v.Intermediates.SHA256Hash)
			}
			var env struct {
				To        string `json:"to"`
				Timestamp int64  `json:"timestamp"`
			}
			json.Unmarshal(v.Message, &env)
			val := snap.NewValidator(snap.Config{Self: env.To, Now: func() time.Time { return time.Unix(env.Timestamp, 0) }})
			if _, err := val.Validate(context.Background(), ex.Message); err != nil {
				t.Errorf("Go rejects the JS-signed vector: %v", err)
			}
		})
	}
	for _, v := range sv.Invalid {
		t.Run("invalid/"+v.Description, func(t *testing.T) {
			var m map[string]any
			dec := json.NewDecoder(bytes.NewReader(v.Message))
			dec.UseNumber()
			if err := dec.Decode(&m); err != nil {
				t.Fatal(err)
			}
			m["sig"] = v.Signature
			raw, _ := json.Marshal(m)
			var r struct {
				OK     bool   `json:"ok"`
				Reason string `json:"reason"`
			}
			runJS(t, 1, &r, "verify", "--message", string(raw))
			if r.OK {
				t.Errorf("JS accepts an invalid vector (%s)", v.Reason)
			}
		})
	}
	// Supplementary vector A (made with the reference SDK 0.5.0, zero aux_rand;
	// not an official vector): no `to`, so two NULs meet after from.
	t.Run("appendix A: no to", func(t *testing.T) {
		msg := `{"id":"svc-001","version":"0.1","from":"bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397",` +
			`"type":"request","method":"service/call","payload":{"name":"query_database","arguments":{"sql":"SELECT 1"}},"timestamp":1738627200}`
		var ex jsExplain
		runJS(t, 0, &ex, "sign", "--secret", strings.Repeat("0a", 32), "--explain", "--message", msg)
		const want = "7375bbcc863f426012e22e499c7345407e32aa995370bcc719ac4907098293f28261877363d15459b9764fcabc5f152d6e844f43134a2fc36e4ced4d84302819"
		if got := sigOf(t, ex.Message); got != want {
			t.Errorf("sig: js %s, want %s", got, want)
		}
		if ex.Digest != "c24079d6bad1d68f4a3778a80f4d43e85f11ee363965b986ea28d6baf7cbe867" {
			t.Errorf("digest: js %s", ex.Digest)
		}
	})
}

// payloadCases are payloads whose canonical forms are easy to get wrong.
var payloadCases = []struct {
	name    string
	payload string
}{
	{"empty", `{}`},
	{"message/send", `{"message":{"messageId":"m-1","role":"user","parts":[{"text":"Write a login form in React"}]}}`},
	{"unicode", `{"text":"你好世界 é ☃ \u2028 \u001f \"q\" \\ tab\t","emoji":"😀"}`},
	// UTF-16 order puts the astral 😀 (D83D…) before U+FF61; code point
	// order would not.
	{"utf16 key order", `{"｡":1,"😀":2,"é":3,"a":4,"A":5,"":6}`},
	{"numbers", `{"big":12345678901234567000,"exp":1e+21,"frac":0.1,"neg":-5,"small":1e-7,"one":1,"zero":0}`},
	{"nested", `{"a":{"b":{"c":{"d":[1,[2,[3,{"e":null,"f":true,"g":false}]]]}}},"x-ext":{"z":1,"y":2}}`},
	{"taskId", `{"taskId":"task-123","historyLength":5}`},
}

// TestJSSignsGoValidates: messages signed by the JS side pass Go's full
// validator (with replay store and recipient check), with to and, for
// service/call, without it, and both sides compute the same digest.
func TestJSSignsGoValidates(t *testing.T) {
	jsinterop.Node(t)
	sender, receiver := newKey(t), newKey(t)
	self := receiver.Address(identity.Mainnet)
	val := snap.NewValidator(snap.Config{Self: self, Replay: snap.NewMemoryReplayStore(0)})
	for i, c := range payloadCases {
		for _, withTo := range []bool{true, false} {
			name := c.name
			if !withTo {
				name += "/no to"
			}
			t.Run(name, func(t *testing.T) {
				// Only service/call may leave out to; the signature
				// input with an empty to is what this checks.
				method := "service/call"
				if withTo {
					method = "message/send"
				}
				msg := `{"method":"` + method + `","payload":` + c.payload
				if withTo {
					msg += `,"to":"` + self + `"`
				}
				msg += `}`
				aux := "zero"
				if i%2 == 1 {
					aux = "random"
				}
				var ex jsExplain
				runJS(t, 0, &ex, "sign", "--secret", sender.Hex(), "--aux", aux, "--explain", "--message", msg)
				v, err := val.Validate(context.Background(), ex.Message)
				if err != nil {
					t.Fatalf("Go rejects a JS-signed message: %v\n%s", err, ex.Message)
				}
				if !v.Signed || v.From != sender.Address(identity.Mainnet) {
					t.Errorf("verified %+v", v)
				}
				if got := hex.EncodeToString(v.Digest[:]); got != ex.Digest {
					t.Errorf("digest: go %s, js %s", got, ex.Digest)
				}
				goCanon, err := snap.Canonicalize([]byte(c.payload))
				if err != nil {
					t.Fatal(err)
				}
				if string(goCanon) != ex.CanonicalPayload {
					t.Errorf("canonical payload:\n go %s\n js %s", goCanon, ex.CanonicalPayload)
				}
			})
		}
	}
}

type jsVerify struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason"`
	Signed bool   `json:"signed"`
	Digest string `json:"digest"`
}

// TestGoSignsJSVerifies: what Go signs, the JS side verifies; any change to
// a signed field makes it reject, and a change of version (not signed, a
// known weakness of SNAP v0.1) does not.
func TestGoSignsJSVerifies(t *testing.T) {
	jsinterop.Node(t)
	k, peer := newKey(t), newKey(t)
	for _, c := range payloadCases {
		t.Run(c.name, func(t *testing.T) {
			m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: k.Address(identity.Mainnet),
				To: peer.Address(identity.Mainnet), Type: snap.TypeRequest, Method: "message/send",
				Payload: []byte(c.payload), Timestamp: time.Now().Unix()}
			if err := m.Sign(k); err != nil {
				t.Fatal(err)
			}
			raw, err := m.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			var r jsVerify
			runJS(t, 0, &r, "verify", "--message", string(raw), "--max-drift", "60")
			if !r.OK || !r.Signed {
				t.Fatalf("JS rejects a Go-signed message: %s\n%s", r.Reason, raw)
			}
			d, _ := m.Digest()
			if r.Digest != hex.EncodeToString(d[:]) {
				t.Errorf("digest: js %s, go %x", r.Digest, d)
			}
		})
	}

	m := &snap.Message{ID: "msg-go-1", Version: snap.ProtocolVersion, From: k.Address(identity.Mainnet),
		To: peer.Address(identity.Mainnet), Type: snap.TypeRequest, Method: "tasks/get",
		Payload: []byte(`{"taskId":"t-1","note":"héllo"}`), Timestamp: time.Now().Unix()}
	if err := m.Sign(k); err != nil {
		t.Fatal(err)
	}
	raw, _ := m.MarshalJSON()
	other := newKey(t).Address(identity.Mainnet)
	tampers := []struct {
		name    string
		field   string
		value   any
		stillOK bool
	}{
		{"payload", "payload", map[string]any{"taskId": "t-2", "note": "héllo"}, false},
		{"to", "to", other, false},
		{"to removed", "to", nil, false},
		{"from", "from", other, false},
		{"id", "id", "msg-go-2", false},
		{"method", "method", "tasks/cancel", false},
		{"type", "type", "event", false},
		{"timestamp", "timestamp", m.Timestamp + 1, false},
		{"sig", "sig", strings.Repeat("0", 128), false},
		{"version (not signed)", "version", "0.2", true},
	}
	for _, tc := range tampers {
		t.Run("tampered "+tc.name, func(t *testing.T) {
			var obj map[string]any
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			if err := dec.Decode(&obj); err != nil {
				t.Fatal(err)
			}
			if tc.value == nil {
				delete(obj, tc.field)
			} else {
				obj[tc.field] = tc.value
			}
			b, _ := json.Marshal(obj)
			want := 1
			if tc.stillOK {
				want = 0
			}
			var r jsVerify
			runJS(t, want, &r, "verify", "--message", string(b))
			if r.OK != tc.stillOK {
				t.Errorf("ok = %v (%s), want %v", r.OK, r.Reason, tc.stillOK)
			}
			if !tc.stillOK && !strings.HasPrefix(r.Reason, "sig:") {
				t.Errorf("reason %q, want a signature failure", r.Reason)
			}
		})
	}
}

// TestNIP44Interop: NIP-44 v2 between go-nostr and nostr-tools, both
// ways, with the same conversation key and, for a fixed nonce, the same
// ciphertext.
func TestNIP44Interop(t *testing.T) {
	jsinterop.Node(t)
	goKey, jsKey := newKey(t), newKey(t)
	goConv, err := nip44.GenerateConversationKey(jsKey.NostrPublicKey(), goKey.NostrSecretKey())
	if err != nil {
		t.Fatal(err)
	}
	type enc struct {
		Ciphertext      string `json:"ciphertext"`
		ConversationKey string `json:"conversationKey"`
		Error           string `json:"error"`
	}
	type dec struct {
		Plaintext       string `json:"plaintext"`
		ConversationKey string `json:"conversationKey"`
		Error           string `json:"error"`
	}
	texts := map[string]string{
		"one byte":  "x",
		"snap json": `{"id":"a","payload":{"text":"你好 😀"}}`,
		"max size":  strings.Repeat("é", 65534/2) + "z", // 65 535 bytes
	}
	for name, text := range texts {
		t.Run(name, func(t *testing.T) {
			// Go → JS.
			ct, err := nip44.Encrypt(text, goConv)
			if err != nil {
				t.Fatal(err)
			}
			var d dec
			runJSInput(t, []byte(ct), 0, &d, "nip44-decrypt", "--secret", jsKey.Hex(), "--pubkey", goKey.NostrPublicKey(), "--ciphertext", "-")
			if d.Plaintext != text {
				t.Errorf("JS decrypts a Go ciphertext to %d bytes, want %d", len(d.Plaintext), len(text))
			}
			if d.ConversationKey != hex.EncodeToString(goConv[:]) {
				t.Errorf("conversation key: js %s, go %x", d.ConversationKey, goConv)
			}
			// JS → Go.
			var e enc
			runJSInput(t, []byte(text), 0, &e, "nip44-encrypt", "--secret", jsKey.Hex(), "--pubkey", goKey.NostrPublicKey(), "--plaintext", "-")
			pt, err := nip44.Decrypt(e.Ciphertext, goConv)
			if err != nil || pt != text {
				t.Errorf("Go decrypts a JS ciphertext: %v (%d bytes, want %d)", err, len(pt), len(text))
			}
		})
	}
	t.Run("fixed nonce gives the same ciphertext", func(t *testing.T) {
		nonce := bytes.Repeat([]byte{0x5a}, 32)
		goCT, err := nip44.Encrypt("same bytes on both sides", goConv, nip44.WithCustomNonce(nonce))
		if err != nil {
			t.Fatal(err)
		}
		var e enc
		runJS(t, 0, &e, "nip44-encrypt", "--secret", jsKey.Hex(), "--pubkey", goKey.NostrPublicKey(),
			"--plaintext", "same bytes on both sides", "--nonce", hex.EncodeToString(nonce))
		if e.Ciphertext != goCT {
			t.Errorf("ciphertexts differ:\n go %s\n js %s", goCT, e.Ciphertext)
		}
	})
	t.Run("over 65535 bytes is refused", func(t *testing.T) {
		var e enc
		runJSInput(t, bytes.Repeat([]byte("a"), 65536), 1, &e, "nip44-encrypt", "--secret", jsKey.Hex(), "--pubkey", goKey.NostrPublicKey(), "--plaintext", "-")
		if !strings.Contains(e.Error, "65535") {
			t.Errorf("error %q", e.Error)
		}
		if _, err := nip44.Encrypt(strings.Repeat("a", 65536), goConv); err == nil {
			t.Errorf("go-nostr encrypts 65536 bytes")
		}
	})
	t.Run("tampered ciphertext is refused", func(t *testing.T) {
		ct, _ := nip44.Encrypt("hello", goConv)
		b := []byte(ct)
		b[len(b)/2] ^= 1
		if b[len(b)/2] == '+' || b[len(b)/2] == '/' || b[len(b)/2] == '=' {
			b[len(b)/2] = 'A'
		}
		var d dec
		runJS(t, 1, &d, "nip44-decrypt", "--secret", jsKey.Hex(), "--pubkey", goKey.NostrPublicKey(), "--ciphertext", string(b))
		if d.Error == "" {
			t.Errorf("no error for a tampered ciphertext")
		}
	})
}

// ---------------------------------------------------------------- relay

func signEvent(t *testing.T, k *identity.Key, kind int, tags nostr.Tags, content string, at time.Time) nostr.Event {
	t.Helper()
	ev := nostr.Event{PubKey: k.NostrPublicKey(), CreatedAt: nostr.Timestamp(at.Unix()), Kind: kind, Tags: tags, Content: content}
	if err := ev.Sign(k.NostrSecretKey()); err != nil {
		t.Fatal(err)
	}
	return ev
}

func ids(evs []*nostr.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func cardJSON(t *testing.T, k *identity.Key, name string, skills ...string) string {
	t.Helper()
	sk := make([]map[string]any, len(skills))
	for i, s := range skills {
		sk[i] = map[string]any{"id": s, "name": strings.ToUpper(s), "description": "does " + s, "tags": []string{"test"}}
	}
	b, _ := json.Marshal(map[string]any{
		"name": name, "description": "interop test agent", "version": "1.0.0",
		"identity": k.Address(identity.Mainnet), "skills": sk,
		"defaultInputModes": []string{"text/plain"}, "defaultOutputModes": []string{"text/plain"},
		"endpoints":   []map[string]string{{"protocol": "wss", "url": "wss://agent.example/snap"}},
		"nostrRelays": []string{"wss://relay.example"},
	})
	return string(b)
}

// TestThirdPartyRelayStoresAndServes: go-nostr publishes to the
// @nostr-relay/core relay and reads back: 4339 is stored and found by #p,
// 21339 is not stored, 31337 is found by #d and by the multi-letter
// #skill, and a newer card replaces the older one.
func TestThirdPartyRelayStoresAndServes(t *testing.T) {
	url := jsinterop.StartRelay(t)
	r := dial(t, url)
	alice, bob, carol := newKey(t), newKey(t), newKey(t)
	now := time.Now()

	stored := signEvent(t, alice, 4339, nostr.Tags{{"p", bob.NostrPublicKey()}}, "sealed snap message", now)
	ephemeral := signEvent(t, alice, 21339, nostr.Tags{{"p", bob.NostrPublicKey()}}, "ephemeral snap message", now)
	for _, ev := range []nostr.Event{stored, ephemeral} {
		if err := r.Publish(ev); err != nil {
			t.Fatalf("publish kind %d: %v", ev.Kind, err)
		}
	}
	got := r.Query(nostr.Filter{Kinds: []int{21339, 4339}, Tags: nostr.TagMap{"p": {bob.NostrPublicKey()}}})
	if len(got) != 1 || got[0].ID != stored.ID {
		t.Errorf("#p query for bob: %v, want only the 4339 event %s", ids(got), stored.ID)
	} else if ok, _ := got[0].CheckSignature(); !ok || got[0].Content != stored.Content {
		t.Errorf("served event differs from the published one")
	}
	if got := r.Query(nostr.Filter{Kinds: []int{4339}, Tags: nostr.TagMap{"p": {carol.NostrPublicKey()}}}); len(got) != 0 {
		t.Errorf("#p query for carol: %v, want none", ids(got))
	}
	since := nostr.Timestamp(now.Unix() + 10)
	if got := r.Query(nostr.Filter{Kinds: []int{4339}, Since: &since}); len(got) != 0 {
		t.Errorf("since in the future: %v, want none", ids(got))
	}

	// A bad signature is refused.
	forged := stored
	forged.Content = "changed"
	forged.ID = forged.GetID()
	if err := r.Publish(forged); err == nil {
		t.Errorf("the relay accepted an event with a bad signature")
	}

	// Cards: the JS side builds the first one exactly as the SDK does,
	// Go publishes it; Go builds the second.
	var jsCard nostr.Event
	runJS(t, 0, &jsCard, "card-event", "--secret", alice.Hex(), "--card", cardJSON(t, alice, "Echo", "echo", "translate"),
		"--created-at", itoa(now.Unix()-10))
	if ok, err := jsCard.CheckSignature(); !ok {
		t.Fatalf("go-nostr rejects the JS card event: %v", err)
	}
	wantTags := nostr.Tags{{"d", alice.Address(identity.Mainnet)}, {"name", "Echo"}, {"version", "1.0.0"},
		{"skill", "echo", "ECHO"}, {"skill", "translate", "TRANSLATE"}, {"endpoint", "wss", "wss://agent.example/snap"}, {"relay", "wss://relay.example"}}
	if !tagsEqual(jsCard.Tags, wantTags) || jsCard.Kind != 31337 || jsCard.PubKey != alice.NostrPublicKey() {
		t.Errorf("JS card event: kind %d tags %v", jsCard.Kind, jsCard.Tags)
	}
	bobCard := signEvent(t, bob, 31337, nostr.Tags{{"d", bob.Address(identity.Mainnet)}, {"name", "Bob"}, {"version", "1.0.0"},
		{"skill", "summarize", "SUMMARIZE"}}, cardJSON(t, bob, "Bob", "summarize"), now)
	for _, ev := range []nostr.Event{jsCard, bobCard} {
		if err := r.Publish(ev); err != nil {
			t.Fatalf("publish card: %v", err)
		}
	}
	if got := r.Query(nostr.Filter{Kinds: []int{31337}, Tags: nostr.TagMap{"skill": {"translate"}}}); len(got) != 1 || got[0].ID != jsCard.ID {
		t.Errorf("#skill translate: %v, want %s", ids(got), jsCard.ID)
	}
	if got := r.Query(nostr.Filter{Kinds: []int{31337}, Tags: nostr.TagMap{"skill": {"summarize", "echo"}}}); len(got) != 2 {
		t.Errorf("#skill summarize|echo: %v, want both cards", ids(got))
	}
	if got := r.Query(nostr.Filter{Kinds: []int{31337}, Tags: nostr.TagMap{"skill": {"nothing"}}}); len(got) != 0 {
		t.Errorf("#skill nothing: %v, want none", ids(got))
	}
	if got := r.Query(nostr.Filter{Kinds: []int{31337}, Tags: nostr.TagMap{"d": {bob.Address(identity.Mainnet)}}}); len(got) != 1 || got[0].ID != bobCard.ID {
		t.Errorf("#d bob: %v", ids(got))
	}
	if got := r.Query(nostr.Filter{Kinds: []int{31337}, Tags: nostr.TagMap{"name": {"Echo"}}}); len(got) != 1 {
		t.Errorf("#name Echo: %v", ids(got))
	}

	// A newer card with the same d replaces the old one.
	newer := signEvent(t, alice, 31337, nostr.Tags{{"d", alice.Address(identity.Mainnet)}, {"name", "Echo"}, {"version", "1.0.1"},
		{"skill", "echo", "ECHO"}}, cardJSON(t, alice, "Echo", "echo"), now)
	if err := r.Publish(newer); err != nil {
		t.Fatal(err)
	}
	if got := r.Query(nostr.Filter{Kinds: []int{31337}, Authors: []string{alice.NostrPublicKey()}}); len(got) != 1 || got[0].ID != newer.ID {
		t.Errorf("after replacement: %v, want only %s", ids(got), newer.ID)
	}
	if got := r.Query(nostr.Filter{Kinds: []int{31337}, Tags: nostr.TagMap{"skill": {"translate"}}}); len(got) != 0 {
		t.Errorf("#skill translate after replacement: %v, want none", ids(got))
	}

	// The JS discovery (the SDK's discoverAgents query) finds the Go card
	// and checks its identity binding.
	out := runJS(t, 0, nil, "discover", "--relay", url, "--skill", "summarize")
	var found struct {
		Event   nostr.Event     `json:"event"`
		Card    json.RawMessage `json:"card"`
		Binding bool            `json:"binding"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &found); err != nil || found.Event.ID != bobCard.ID || !found.Binding {
		t.Errorf("JS discover: %s", out)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func tagsEqual(a, b nostr.Tags) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], "\x00") != strings.Join(b[i], "\x00") {
			return false
		}
	}
	return true
}

// rawSub opens a bare WebSocket subscription, so the test sees exactly
// what the relay sends (go-nostr and nostr-tools re-filter client-side).
func rawSub(t *testing.T, url string, filter string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.DefaultDialer.Dial(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.WriteMessage(websocket.TextMessage, []byte(`["REQ","raw",`+filter+`]`)); err != nil {
		t.Fatal(err)
	}
	for {
		msg := readRaw(t, c, 5*time.Second)
		if msg == nil {
			t.Fatal("no EOSE from the relay")
		}
		if msg[0] == "EOSE" {
			return c
		}
	}
}

// readRaw returns the next relay message, or nil after d.
func readRaw(t *testing.T, c *websocket.Conn, d time.Duration) []any {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	_, b, err := c.ReadMessage()
	if err != nil {
		return nil
	}
	var msg []any
	if err := json.Unmarshal(b, &msg); err != nil || len(msg) == 0 {
		t.Fatalf("relay sent %s", b)
	}
	return msg
}

// TestThirdPartyRelayLiveFilters documents how @nostr-relay/core 0.0.40
// matches live subscriptions: by ids, authors, kinds, since and until
// only. Tag filters, single-letter (#p) and multi-letter (#skill) alike,
// are ignored after EOSE, so a subscriber receives events that do not
// match them; clients must re-filter, as go-nostr (TestGoNostrClient) and
// nostr-tools do. Stored queries do honour them (the test above).
func TestThirdPartyRelayLiveFilters(t *testing.T) {
	url := jsinterop.StartRelay(t)
	pub := dial(t, url)
	alice, bob, carol := newKey(t), newKey(t), newKey(t)

	pSub := rawSub(t, url, `{"kinds":[21339],"#p":["`+bob.NostrPublicKey()+`"]}`)
	skillSub := rawSub(t, url, `{"kinds":[31337],"#skill":["nothing"]}`)

	toCarol := signEvent(t, alice, 21339, nostr.Tags{{"p", carol.NostrPublicKey()}}, "for carol", time.Now())
	card := signEvent(t, alice, 31337, nostr.Tags{{"d", alice.Address(identity.Mainnet)}, {"skill", "echo", "Echo"}}, "{}", time.Now())
	toBob := signEvent(t, alice, 21339, nostr.Tags{{"p", bob.NostrPublicKey()}}, "for bob", time.Now())
	for _, ev := range []nostr.Event{toCarol, card, toBob} {
		if err := pub.Publish(ev); err != nil {
			t.Fatal(err)
		}
	}

	// Publish has returned, so the relay has broadcast all three: a short
	// read deadline is enough.
	seen := func(c *websocket.Conn) map[string]bool {
		got := map[string]bool{}
		for {
			msg := readRaw(t, c, 500*time.Millisecond)
			if msg == nil {
				return got
			}
			if msg[0] == "EVENT" && len(msg) == 3 {
				if ev, ok := msg[2].(map[string]any); ok {
					got[ev["id"].(string)] = true
				}
			}
		}
	}
	p := seen(pSub)
	if !p[toBob.ID] {
		t.Errorf("the #p subscription missed the event for bob")
	}
	if !p[toCarol.ID] {
		t.Errorf("the relay now honours #p on live subscriptions; update relay.mjs's notes and this test")
	} else {
		t.Logf("as documented: the live #p=bob subscription also received the event for carol")
	}
	if s := seen(skillSub); !s[card.ID] {
		t.Errorf("the relay now honours multi-letter #skill on live subscriptions; update relay.mjs's notes and this test")
	} else {
		t.Logf("as documented: the live #skill=nothing subscription received a card with skill echo")
	}
}

// TestGoNostrClient runs go-nostr's own client against the third-party
// relay: RelayConnect, Publish, QuerySync (a 4339 event found by #p, a
// card found by the multi-letter #skill) and a live Subscribe that must
// drop what the relay over-delivers. It runs in a child process (this
// test binary again) that exits with its connection still open, because
// go-nostr v0.38.2 has two defects that would break the rest of a -race
// run: closing a Relay is a data race (Close reads r.Connection while the
// connection goroutine sets it to nil), and every QuerySync leaves a
// goroutine spinning once its context is done.
func TestGoNostrClient(t *testing.T) {
	if url := os.Getenv("SNAPNODE_INTEROP_GONOSTR_RELAY"); url != "" {
		goNostrChild(t, url)
		return
	}
	url := jsinterop.StartRelay(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestGoNostrClient$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "SNAPNODE_INTEROP_GONOSTR_RELAY="+url)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestGoNostrClient")) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "crosscheck_test.go") {
			t.Log("child:", strings.TrimSpace(line))
		}
	}
}

func goNostrChild(t *testing.T, url string) {
	ctx := context.Background()
	r, err := nostr.RelayConnect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	alice, bob, carol := newKey(t), newKey(t), newKey(t)
	publish := func(ev nostr.Event) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := r.Publish(pctx, ev); err != nil {
			t.Fatal(err)
		}
	}

	// Live: the relay sends the event for carol to a #p=bob subscription;
	// go-nostr must drop it.
	sub, err := r.Subscribe(ctx, nostr.Filters{{Kinds: []int{21339}, Tags: nostr.TagMap{"p": {bob.NostrPublicKey()}}}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.EndOfStoredEvents:
	case <-time.After(5 * time.Second):
		t.Fatal("no EOSE")
	}
	toCarol := signEvent(t, alice, 21339, nostr.Tags{{"p", carol.NostrPublicKey()}}, "for carol", time.Now())
	toBob := signEvent(t, alice, 21339, nostr.Tags{{"p", bob.NostrPublicKey()}}, "for bob", time.Now())
	publish(toCarol)
	publish(toBob)
	var got []string
	timeout := time.After(500 * time.Millisecond)
live:
	for {
		select {
		case ev := <-sub.Events:
			got = append(got, ev.ID)
		case <-timeout:
			break live
		}
	}
	if len(got) != 1 || got[0] != toBob.ID {
		t.Errorf("go-nostr live subscription delivered %v, want only %s", got, toBob.ID)
	}

	// Stored: QuerySync with #p and #skill.
	msg := signEvent(t, alice, 4339, nostr.Tags{{"p", bob.NostrPublicKey()}}, "sealed", time.Now())
	card := signEvent(t, alice, 31337, nostr.Tags{{"d", alice.Address(identity.Mainnet)}, {"name", "A"}, {"version", "1.0.0"},
		{"skill", "echo", "Echo"}}, cardJSON(t, alice, "A", "echo"), time.Now())
	publish(msg)
	publish(card)
	check := func(f nostr.Filter, want ...string) {
		t.Helper()
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		evs, err := r.QuerySync(qctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(evs); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("QuerySync %v: %v, want %v", f, got, want)
		}
	}
	check(nostr.Filter{Kinds: []int{21339, 4339}, Tags: nostr.TagMap{"p": {bob.NostrPublicKey()}}}, msg.ID)
	check(nostr.Filter{Kinds: []int{4339}, Tags: nostr.TagMap{"p": {carol.NostrPublicKey()}}})
	check(nostr.Filter{Kinds: []int{31337}, Tags: nostr.TagMap{"skill": {"echo"}}}, card.ID)
	check(nostr.Filter{Kinds: []int{31337}, Tags: nostr.TagMap{"skill": {"other"}}})
	t.Logf("go-nostr: RelayConnect, Publish, QuerySync (#p, #skill) and a live #p Subscribe work against the third-party relay")
}
