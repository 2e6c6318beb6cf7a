package snapref

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ModuleRoot returns the folder of the module's go.mod above the test's
// working folder.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}

// EnvDir is the environment variable that names the snap-reference
// folder, when it is not shared/snap-reference beside the project root.
const EnvDir = "SNAPNODE_SNAP_REFERENCE"

// Dir returns the snap-reference folder: $SNAPNODE_SNAP_REFERENCE, else
// shared/snap-reference beside the project root. When it cannot be found,
// the test is skipped with a message naming the folder it looked for.
func Dir(t testing.TB) string {
	t.Helper()
	ref := os.Getenv(EnvDir)
	if ref == "" {
		ref = filepath.Join(filepath.Dir(ModuleRoot(t)), "shared", "snap-reference")
	}
	if _, err := os.Stat(ref); err != nil {
		t.Skipf("snap-reference vectors not found at %s (set %s to a folder holding the SNAP specification's schemas/ and the contents of its test-vectors/)", ref, EnvDir)
	}
	return ref
}

// Load decodes the JSON file at rel (relative to Dir) into v.
func Load(t testing.TB, rel string, v any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// Schemas compiles the SNAP specification's published JSON Schemas (the
// schemas/ folder of Dir), each under its $id, and returns a function
// giving the compiled schema of a file named relative to that folder
// ("error.schema.json", "methods/message-send.schema.json").
func Schemas(t testing.TB) func(name string) *jsonschema.Schema {
	t.Helper()
	dir := filepath.Join(Dir(t), "schemas")
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	ids := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".schema.json") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return err
		}
		id, _ := doc.(map[string]any)["$id"].(string)
		rel, _ := filepath.Rel(dir, path)
		ids[filepath.ToSlash(rel)] = id
		return c.AddResource(id, doc)
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(name string) *jsonschema.Schema {
		t.Helper()
		s, err := c.Compile(ids[name])
		if err != nil {
			t.Fatalf("compile %s: %v", name, err)
		}
		return s
	}
}

// KeyVectors is keys/key-encoding.json.
type KeyVectors struct {
	Vectors []struct {
		Description      string `json:"description"`
		PrivateKey       string `json:"privateKey"`
		PublicKeyXOnly   string `json:"publicKeyXOnly"`
		TweakedPublicKey string `json:"tweakedPublicKey"`
		P2TRAddress      string `json:"p2trAddress"`
		NostrPubkeyHex   string `json:"nostrPubkeyHex"`
		Network          string `json:"network"`
	} `json:"vectors"`
}

// CanonicalVectors is canonical/jcs-payloads.json. Input is kept raw so the
// test canonicalizes the bytes of the file, not a re-encoding of them.
type CanonicalVectors struct {
	Vectors []struct {
		Description string          `json:"description"`
		Input       json.RawMessage `json:"input"`
		Expected    string          `json:"expected"`
	} `json:"vectors"`
}

// SignatureVectors is signatures/schnorr-signatures.json.
type SignatureVectors struct {
	Valid []struct {
		Description       string          `json:"description"`
		PrivateKey        string          `json:"privateKey"`
		InternalPublicKey string          `json:"internalPublicKey"`
		TweakedPublicKey  string          `json:"tweakedPublicKey"`
		Message           json.RawMessage `json:"message"`
		Intermediates     struct {
			CanonicalPayload  string `json:"canonicalPayload"`
			SignatureInput    string `json:"signatureInput"`
			SignatureInputHex string `json:"signatureInputHex"`
			SHA256Hash        string `json:"sha256Hash"`
		} `json:"intermediates"`
		ExpectedSignature string `json:"expectedSignature"`
	} `json:"valid"`
	Invalid []struct {
		Description      string          `json:"description"`
		Message          json.RawMessage `json:"message"`
		Signature        string          `json:"signature"`
		TweakedPublicKey string          `json:"tweakedPublicKey"`
		Reason           string          `json:"reason"`
	} `json:"invalid"`
}

// SchemaTests is schemas/tests/*.test.json.
type SchemaTests struct {
	Description string `json:"description"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}
