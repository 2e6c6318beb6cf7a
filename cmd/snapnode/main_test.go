package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/snap"
)

// The key of the SNAP reference vectors and its addresses.
const (
	testSecret  = "0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a"
	testAddress = "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397"
	otherSecret = "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b"
	// T is the signing time used throughout, 2025-02-04T00:00:00Z.
	T = 1738627200
)

var (
	ts      = strconv.Itoa(T)
	hex64   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	mainAdr = regexp.MustCompile(`^bc1p[02-9ac-hj-np-z]{58}$`)
	testAdr = regexp.MustCompile(`^tb1p[02-9ac-hj-np-z]{58}$`)
)

type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs snapnode in-process with stdin and args.
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

// runTerminal is runCLI with stdout taken for a terminal.
func runTerminal(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runOn(args, strings.NewReader(stdin), &out, &errOut, true)
	return result{code, out.String(), errOut.String()}
}

func (r result) String() string {
	return "exit " + strconv.Itoa(r.code) + "\nstdout: " + r.stdout + "\nstderr: " + r.stderr
}

// lines parses key=value lines.
func lines(s string) map[string]string {
	m := make(map[string]string)
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

// snapError decodes {"error":{…}} from stdout.
func snapError(t *testing.T, r result) errorObject {
	t.Helper()
	var b struct {
		Error *errorObject `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &b); err != nil || b.Error == nil {
		t.Fatalf("stdout is not an error object: %v\n%s", err, r)
	}
	if b.Error.Data == nil {
		t.Errorf("error has no data object: %s", r.stdout)
	}
	return *b.Error
}

// writeFile writes content to a new file in dir with mode perm.
func writeFile(t *testing.T, dir, name, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // umask
		t.Fatal(err)
	}
	return p
}

func keyFile(t *testing.T, dir, secret string) string {
	return writeFile(t, dir, "key-"+secret[:4], secret+"\n", 0o600)
}

func noEnvKey(t *testing.T) { t.Setenv(identity.EnvKey, "") }

func TestUsage(t *testing.T) {
	noEnvKey(t)
	dir := t.TempDir()
	key := keyFile(t, dir, testSecret)
	tests := []struct {
		name string
		args []string
		code int
		// out and errOut are substrings of stdout and stderr.
		out, errOut string
	}{
		{"no arguments", nil, 2, "", "commands:"},
		{"help", []string{"help"}, 0, "commands:", ""},
		{"--help", []string{"--help"}, 0, "keygen", ""},
		{"help lists every command", []string{"help"}, 0, "card", ""},
		{"help of a command", []string{"help", "verify"}, 0, "usage: snapnode verify", ""},
		{"help of card sign", []string{"help", "card", "sign"}, 0, "usage: snapnode card sign", ""},
		{"help of unknown", []string{"help", "frobnicate"}, 2, "", "unknown command"},
		{"unknown command", []string{"frobnicate"}, 2, "", "unknown command"},
		{"-h of a command", []string{"keygen", "-h"}, 0, "", "usage: snapnode keygen"},
		{"unknown flag", []string{"keygen", "--bogus"}, 2, "", "unknown flag --bogus"},
		{"keygen takes no argument", []string{"keygen", "x"}, 2, "", "too many arguments"},
		{"verify takes one file", []string{"verify", "a", "b"}, 2, "", "too many arguments"},
		{"verify --now not a number", []string{"verify", "--now", "soon"}, 2, "", "invalid value"},
		{"verify --now negative", []string{"verify", "--now", "-5"}, 2, "", "invalid value"},
		{"verify --drift negative", []string{"verify", "--drift", "-1"}, 2, "", "--drift"},
		{"verify unreadable file", []string{"verify", filepath.Join(dir, "missing.json")}, 2, "", "no such file"},
		{"sign without a key", []string{"sign"}, 2, "", "no key"},
		{"sign with a missing key file", []string{"sign", "--key", filepath.Join(dir, "nokey")}, 2, "", "does not exist (snapnode keygen"},
		{"sign unreadable file", []string{"sign", "--key", key, filepath.Join(dir, "missing.json")}, 2, "", "no such file"},
		{"card without sub-command", []string{"card"}, 2, "", "usage: snapnode card"},
		{"card unknown sub-command", []string{"card", "frob"}, 2, "", "unknown sub-command"},
		{"card sign without a key", []string{"card", "sign"}, 2, "", "no key"},
		{"card verify takes one file", []string{"card", "verify", "a", "b"}, 2, "", "too many arguments"},
		{"card verify unreadable file", []string{"card", "verify", filepath.Join(dir, "missing.json")}, 2, "", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, "", tt.args...)
			if r.code != tt.code || !strings.Contains(r.stdout, tt.out) || !strings.Contains(r.stderr, tt.errOut) {
				t.Errorf("want exit %d, stdout ∋ %q, stderr ∋ %q; got %s", tt.code, tt.out, tt.errOut, r)
			}
		})
	}
}

func TestKeygen(t *testing.T) {
	t.Run("out", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "agent.key")
		r := runCLI(t, "", "keygen", "--out", path)
		if r.code != 0 {
			t.Fatal(r)
		}
		kv := lines(r.stdout)
		if !mainAdr.MatchString(kv["address"]) || !hex64.MatchString(kv["nostr"]) || kv["key"] != path {
			t.Errorf("unexpected output %q", r.stdout)
		}
		if _, ok := kv["secret"]; ok || strings.Contains(r.stdout+r.stderr, "secret=") {
			t.Errorf("secret printed although saved: %s", r)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Errorf("key file mode %04o, want 0600", st.Mode().Perm())
		}
		k, err := identity.LoadKeyFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if k.Address(identity.Mainnet) != kv["address"] || k.NostrPublicKey() != kv["nostr"] {
			t.Error("printed address or nostr key is not the saved key's")
		}
		before, _ := os.ReadFile(path)

		// A second keygen never overwrites it.
		r = runCLI(t, "", "keygen", "--out", path)
		if r.code != 1 || !strings.Contains(r.stderr, "exists") || r.stdout != "" {
			t.Errorf("overwrite: want exit 1 with nothing on stdout, got %s", r)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Error("key file changed")
		}
	})
	t.Run("secret printed without out", func(t *testing.T) {
		r := runCLI(t, "", "keygen")
		if r.code != 0 {
			t.Fatal(r)
		}
		kv := lines(r.stdout)
		k, err := identity.FromHex(kv["secret"])
		if err != nil {
			t.Fatalf("secret line: %v\n%s", err, r)
		}
		if k.Address(identity.Mainnet) != kv["address"] || k.NostrPublicKey() != kv["nostr"] {
			t.Error("secret does not match the address")
		}
		if !strings.Contains(r.stderr, "WARNING") {
			t.Error("no warning about the printed secret")
		}
	})
	t.Run("testnet", func(t *testing.T) {
		r := runCLI(t, "", "keygen", "--testnet")
		if kv := lines(r.stdout); r.code != 0 || !testAdr.MatchString(kv["address"]) {
			t.Error(r)
		}
	})
	for _, tc := range []struct {
		args []string
		net  identity.Network
		path string
	}{
		{[]string{"keygen", "--mnemonic"}, identity.Mainnet, "m/86'/0'/0'/0/0"},
		{[]string{"keygen", "--mnemonic", "--testnet"}, identity.Testnet, "m/86'/1'/0'/0/0"},
	} {
		t.Run("mnemonic "+tc.net.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "k")
			r := runCLI(t, "", append(tc.args, "--out", path)...)
			if r.code != 0 {
				t.Fatal(r)
			}
			words := lines(r.stderr)["mnemonic"]
			if n := len(strings.Fields(words)); n != 24 {
				t.Fatalf("mnemonic has %d words: %s", n, r)
			}
			if !strings.Contains(r.stderr, "WARNING") || !strings.Contains(r.stderr, "write down") {
				t.Error("no warning to write the mnemonic down")
			}
			if strings.Contains(r.stdout, words) {
				t.Error("mnemonic on stdout")
			}
			kv := lines(r.stdout)
			if kv["path"] != tc.path {
				t.Errorf("path %q, want %q", kv["path"], tc.path)
			}
			k, err := identity.FromMnemonic(words, "", tc.net, 0)
			if err != nil {
				t.Fatal(err)
			}
			saved, err := identity.LoadKeyFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if k.Address(tc.net) != kv["address"] || saved.Hex() != k.Hex() {
				t.Error("address or saved key is not the mnemonic's BIP-86 key")
			}
		})
	}
}

// signed signs msg with the test key at T and returns the signed message.
func signed(t *testing.T, key, msg string, extra ...string) string {
	t.Helper()
	r := runCLI(t, msg, append([]string{"sign", "--key", key, "--now", ts}, extra...)...)
	if r.code != 0 {
		t.Fatalf("sign: %s", r)
	}
	return r.stdout
}

func TestSign(t *testing.T) {
	noEnvKey(t)
	dir := t.TempDir()
	key := keyFile(t, dir, testSecret)

	t.Run("fills and signs", func(t *testing.T) {
		out := signed(t, key, `{"method":"message/send","payload":{"b":2,"a":"<&>"},"x-unknown":true}`)
		if !strings.HasSuffix(out, "}\n") || strings.Count(out, "\n") != 1 {
			t.Errorf("want one line of JSON, got %q", out)
		}
		m, err := snap.Parse([]byte(out))
		if err != nil {
			t.Fatal(err)
		}
		if m.Version != "0.1" || m.From != testAddress || m.Type != snap.TypeRequest || m.Timestamp != T ||
			!regexp.MustCompile(`^[0-9a-f-]{36}$`).MatchString(m.ID) || len(m.Sig) != 128 {
			t.Errorf("unexpected message %s", out)
		}
		if string(m.Payload) != `{"a":"<&>","b":2}` {
			t.Errorf("payload %s", m.Payload)
		}
	})
	t.Run("keeps present fields", func(t *testing.T) {
		in := `{"id":"my-id","type":"response","method":"message/send","payload":{},"timestamp":5,"to":"bc1p8ujjp6rlj8vhlp0h6xzn722glk7jv5u7pev7c024v9m8ux29nq0qcnnhqz"}`
		m, err := snap.Parse([]byte(signed(t, key, in)))
		if err != nil {
			t.Fatal(err)
		}
		if m.ID != "my-id" || m.Type != snap.TypeResponse || m.Timestamp != 5 || m.To == "" {
			t.Errorf("present fields changed: %+v", m)
		}
	})
	t.Run("file argument, dash and env key", func(t *testing.T) {
		f := writeFile(t, dir, "msg.json", `{"method":"tasks/get","payload":{"id":"t1"}}`, 0o644)
		for _, args := range [][]string{{"sign", "--key", key, f}, {"sign", f, "--key", key}, {"sign", "--key", key, "-"}} {
			r := runCLI(t, `{"method":"tasks/get","payload":{"id":"t1"}}`, args...)
			if r.code != 0 || !strings.Contains(r.stdout, testAddress) {
				t.Errorf("%v: %s", args, r)
			}
		}
		t.Setenv(identity.EnvKey, otherSecret)
		r := runCLI(t, "", "sign", f)
		other, _ := identity.FromHex(otherSecret)
		if r.code != 0 || !strings.Contains(r.stdout, other.Address(identity.Mainnet)) {
			t.Errorf("SNAPNODE_KEY: %s", r)
		}
	})
	t.Run("testnet", func(t *testing.T) {
		k, _ := identity.FromHex(testSecret)
		out := signed(t, key, `{"method":"message/send","payload":{}}`, "--testnet")
		if !strings.Contains(out, `"from":"`+k.Address(identity.Testnet)+`"`) {
			t.Errorf("want the testnet address: %s", out)
		}
		if r := runCLI(t, out, "verify", "--now", ts); r.code != 0 {
			t.Error(r)
		}
	})

	failures := []struct {
		name, in string
		code     int
		snap     int    // expected SNAP code on stdout; 0 for a stderr message
		field    string // expected data.field
		errOut   string
	}{
		{"missing method", `{"payload":{}}`, 1, 1004, "method", ""},
		{"missing payload", `{"method":"message/send"}`, 1, 1004, "payload", ""},
		{"bad type", `{"method":"message/send","payload":{},"type":"shout"}`, 1, 1004, "type", ""},
		{"not json", `not json`, 1, 1003, "", ""},
		{"array", `[1]`, 1, 1003, "", ""},
		{"duplicate member", `{"method":"message/send","payload":{},"method":"tasks/get"}`, 1, 1003, "", ""},
		{"another major version", `{"method":"message/send","payload":{},"version":"1.0"}`, 1, 5004, "", ""},
		{"from of another key", `{"method":"message/send","payload":{},"from":"bc1p8ujjp6rlj8vhlp0h6xzn722glk7jv5u7pev7c024v9m8ux29nq0qcnnhqz"}`, 1, 0, "", "not the address of the signing key"},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, tt.in, "sign", "--key", key)
			if r.code != tt.code {
				t.Fatalf("want exit %d, got %s", tt.code, r)
			}
			if tt.snap == 0 {
				if r.stdout != "" || !strings.Contains(r.stderr, tt.errOut) {
					t.Errorf("want stderr ∋ %q, got %s", tt.errOut, r)
				}
				return
			}
			e := snapError(t, r)
			if e.Code != tt.snap || tt.field != "" && e.Data["field"] != tt.field {
				t.Errorf("want %d field %q, got %s", tt.snap, tt.field, r)
			}
		})
	}
	t.Run("key file readable by others", func(t *testing.T) {
		loose := writeFile(t, dir, "loose.key", testSecret, 0o644)
		r := runCLI(t, `{}`, "sign", "--key", loose)
		if r.code != 2 || !strings.Contains(r.stderr, "chmod 600") {
			t.Error(r)
		}
	})
}

func TestVerify(t *testing.T) {
	noEnvKey(t)
	dir := t.TempDir()
	key := keyFile(t, dir, testSecret)
	msg := signed(t, key, `{"method":"message/send","payload":{"message":{"text":"a"}}}`)
	okOut := `{"ok":true,"from":"` + testAddress + `","signed":true}` + "\n"
	msgFile := writeFile(t, dir, "signed.json", msg, 0o644)

	unsigned := func(typ string) string {
		return `{"id":"r1","version":"0.1","from":"` + testAddress + `","type":"` + typ +
			`","method":"message/send","payload":{},"timestamp":` + ts + `}`
	}
	tests := []struct {
		name  string
		in    string
		args  []string
		out   string // exact stdout on success
		snap  int    // expected SNAP code on failure
		field string
	}{
		{"round trip", msg, []string{"--now", ts}, okOut, 0, ""},
		{"round trip from file", "", []string{"--now", ts, msgFile}, okOut, 0, ""},
		{"flag after file", "", []string{msgFile, "--now", ts}, okOut, 0, ""},
		{"stdin dash", msg, []string{"--now", ts, "-"}, okOut, 0, ""},
		{"60 s late is in time", msg, []string{"--now", strconv.Itoa(T + 60)}, okOut, 0, ""},
		{"61 s late is stale", msg, []string{"--now", strconv.Itoa(T + 61)}, "", 2004, ""},
		{"61 s early is stale", msg, []string{"--now", strconv.Itoa(T - 61)}, "", 2004, ""},
		{"wider drift", msg, []string{"--now", strconv.Itoa(T + 100), "--drift", "120"}, okOut, 0, ""},
		{"zero drift, same second", msg, []string{"--now", ts, "--drift", "0"}, okOut, 0, ""},
		{"zero drift, one second off", msg, []string{"--now", strconv.Itoa(T + 1), "--drift", "0"}, "", 2004, ""},
		{"stale without --now", msg, nil, "", 2004, ""},
		{"tampered payload", strings.Replace(msg, `"text":"a"`, `"text":"b"`, 1), []string{"--now", ts}, "", 2001, ""},
		{"tampered id", regexp.MustCompile(`"id":"[^"]*"`).ReplaceAllString(msg, `"id":"forged"`), []string{"--now", ts}, "", 2001, ""},
		{"not json", "not json", []string{"--now", ts}, "", 1003, ""},
		{"empty input", "", []string{"--now", ts}, "", 1003, ""},
		{"not an object", `["a"]`, nil, "", 1003, ""},
		{"unsigned response", unsigned("response"), []string{"--now", ts},
			`{"ok":true,"from":"` + testAddress + `","signed":false}` + "\n", 0, ""},
		{"unsigned event", unsigned("event"), []string{"--now", ts},
			`{"ok":true,"from":"` + testAddress + `","signed":false}` + "\n", 0, ""},
		{"unsigned request", unsigned("request"), []string{"--now", ts}, "", 2002, "sig"},
		{"missing field", `{"id":"a"}`, nil, "", 1004, "version"},
		{"bad from", strings.Replace(unsigned("event"), testAddress, "bc1qnotp2tr", 1), []string{"--now", ts}, "", 2005, "from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, tt.in, append([]string{"verify"}, tt.args...)...)
			if tt.snap == 0 {
				if r.code != 0 || r.stdout != tt.out {
					t.Errorf("want exit 0 and %q, got %s", tt.out, r)
				}
				return
			}
			if r.code != 1 {
				t.Fatalf("want exit 1, got %s", r)
			}
			e := snapError(t, r)
			if e.Code != tt.snap || tt.field != "" && e.Data["field"] != tt.field {
				t.Errorf("want %d field %q, got %s", tt.snap, tt.field, r)
			}
			if e.Message == "" {
				t.Error("empty message")
			}
		})
	}
}

const testCard = `{
  "name": "Test Agent",
  "description": "An agent for tests <&>",
  "version": "1.0.0",
  "nostrRelays": ["wss://relay.example.com"],
  "skills": [{"id": "echo", "name": "Echo", "description": "Says it back", "tags": ["test"]}],
  "defaultInputModes": ["text/plain"],
  "defaultOutputModes": ["text/plain"]
}`

func TestCard(t *testing.T) {
	noEnvKey(t)
	dir := t.TempDir()
	key := keyFile(t, dir, testSecret)
	other, _ := identity.FromHex(otherSecret)

	r := runCLI(t, testCard, "card", "sign", "--key", key, "--now", ts)
	if r.code != 0 {
		t.Fatal(r)
	}
	doc := r.stdout
	var sc struct {
		Card      map[string]any `json:"card"`
		Sig       string         `json:"sig"`
		PublicKey string         `json:"publicKey"`
		Timestamp int64          `json:"timestamp"`
	}
	if err := json.Unmarshal([]byte(doc), &sc); err != nil {
		t.Fatal(err)
	}
	if sc.Card["identity"] != testAddress || len(sc.Sig) != 128 || !hex64.MatchString(sc.PublicKey) || sc.Timestamp != T {
		t.Errorf("unexpected signed card %s", doc)
	}
	okOut := `{"ok":true,"identity":"` + testAddress + `","name":"Test Agent"}` + "\n"
	docFile := writeFile(t, dir, "card.json", doc, 0o644)

	tests := []struct {
		name string
		in   string
		args []string
		code int
		out  string // exact stdout on success
		snap int
	}{
		{"verify round trip", doc, []string{"verify"}, 0, okOut, 0},
		{"verify from file", "", []string{"verify", docFile}, 0, okOut, 0},
		{"verify tampered card", strings.Replace(doc, "Test Agent", "Evil Agent", 1), []string{"verify"}, 1, "", 2001},
		{"verify tampered timestamp", strings.Replace(doc, `"timestamp":`+ts, `"timestamp":`+strconv.Itoa(T+1), 1), []string{"verify"}, 1, "", 2001},
		{"verify not json", "not json", []string{"verify"}, 1, "", 3002},
		{"verify a bare card", testCard, []string{"verify"}, 1, "", 3002},
		{"sign keeps a matching identity", strings.Replace(testCard, `"version"`, `"identity":"`+testAddress+`","version"`, 1),
			[]string{"sign", "--key", key, "--now", ts}, 0, doc, 0},
		{"sign not json", "not json", []string{"sign", "--key", key}, 1, "", 3002},
		{"sign invalid card", strings.Replace(testCard, `"1.0.0"`, `"one"`, 1), []string{"sign", "--key", key}, 1, "", 3002},
		{"sign identity of another key", strings.Replace(testCard, `"version"`, `"identity":"`+other.Address(identity.Mainnet)+`","version"`, 1),
			[]string{"sign", "--key", key}, 1, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, tt.in, append([]string{"card"}, tt.args...)...)
			if r.code != tt.code {
				t.Fatalf("want exit %d, got %s", tt.code, r)
			}
			switch {
			case tt.code == 0:
				// Signatures use fresh randomness: compare all but sig.
				anySig := regexp.MustCompile(`"sig":"[0-9a-f]{128}"`)
				if anySig.ReplaceAllString(r.stdout, "SIG") != anySig.ReplaceAllString(tt.out, "SIG") {
					t.Errorf("stdout\n got  %s\n want %s", r.stdout, tt.out)
				}
			case tt.snap == 0:
				if r.stdout != "" || r.stderr == "" {
					t.Errorf("want a message on stderr only, got %s", r)
				}
			default:
				if e := snapError(t, r); e.Code != tt.snap {
					t.Errorf("want code %d, got %s", tt.snap, r)
				}
			}
		})
	}

	t.Run("testnet identity", func(t *testing.T) {
		r := runCLI(t, testCard, "card", "sign", "--key", key, "--testnet")
		if r.code != 0 || !strings.Contains(r.stdout, `"identity":"tb1p`) {
			t.Fatal(r)
		}
		if v := runCLI(t, r.stdout, "card", "verify"); v.code != 0 {
			t.Error(v)
		}
	})
}

// TestBinary builds the real binary and runs keygen, sign and verify as
// separate processes.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := testutil.Binary(t)
	runBin := func(stdin string, args ...string) result {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), identity.EnvKey+"=")
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			code = ee.ExitCode()
		case err != nil:
			t.Fatal(err)
		}
		return result{code, out.String(), errOut.String()}
	}

	key := filepath.Join(dir, "agent.key")
	r := runBin("", "keygen", "--out", key)
	if r.code != 0 {
		t.Fatal(r)
	}
	addr := lines(r.stdout)["address"]
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	if r := runBin("", "keygen", "--out", key); r.code != 1 {
		t.Errorf("overwrite: %s", r)
	}

	msg := runBin(`{"method":"message/send","payload":{}}`, "sign", "--key", key)
	if msg.code != 0 {
		t.Fatal(msg)
	}
	msgFile := writeFile(t, dir, "msg.json", msg.stdout, 0o644)
	if r := runBin("", "verify", msgFile); r.code != 0 || r.stdout != `{"ok":true,"from":"`+addr+`","signed":true}`+"\n" {
		t.Errorf("verify: %s", r)
	}
	if r := runBin("not json", "verify"); r.code != 1 || !strings.Contains(r.stdout, `"code":1003`) {
		t.Errorf("verify not json: %s", r)
	}
	if r := runBin("", "verify", filepath.Join(dir, "missing")); r.code != 2 {
		t.Errorf("verify missing file: %s", r)
	}
	if r := runBin(""); r.code != 2 || !strings.Contains(r.stderr, "commands:") {
		t.Errorf("no arguments: %s", r)
	}
}
