package snap

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/secp"
)

// ErrWrongKey is returned by Sign when the message's from is not the
// signing key's address.
var ErrWrongKey = errors.New("from is not the address of the signing key")

// SignatureInput returns the exact bytes a SNAP signature covers: id, from,
// to ("" when absent), type, method, the canonical payload and the decimal
// timestamp, separated by six NUL bytes. version, sig and unknown fields are
// not signed.
func (m *Message) SignatureInput() ([]byte, error) {
	payload, err := m.canonicalPayload()
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(m.ID)+len(m.From)+len(m.To)+len(m.Type)+len(m.Method)+len(payload)+32)
	b = appendSignatureInput(b, m, payload)
	return b, nil
}

func appendSignatureInput(b []byte, m *Message, payload []byte) []byte {
	b = append(b, m.ID...)
	b = append(b, 0)
	b = append(b, m.From...)
	b = append(b, 0)
	b = append(b, m.To...)
	b = append(b, 0)
	b = append(b, m.Type...)
	b = append(b, 0)
	b = append(b, m.Method...)
	b = append(b, 0)
	b = append(b, payload...)
	b = append(b, 0)
	return strconv.AppendInt(b, m.Timestamp, 10)
}

// Digest returns SHA-256 of the signature input: the 32-byte message that
// BIP-340 signs.
func (m *Message) Digest() ([32]byte, error) {
	payload, err := m.canonicalPayload()
	if err != nil {
		return [32]byte{}, err
	}
	return digest(m, payload), nil
}

// digest hashes the signature input in pieces, without building it.
func digest(m *Message, payload []byte) [32]byte {
	h := sha256.New()
	var ts [20]byte
	write := func(h hash.Hash, s string) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	write(h, m.ID)
	write(h, m.From)
	write(h, m.To)
	write(h, string(m.Type))
	write(h, m.Method)
	h.Write(payload)
	h.Write([]byte{0})
	h.Write(strconv.AppendInt(ts[:0], m.Timestamp, 10))
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Sign canonicalizes the payload (once), checks that From is k's address
// and sets Sig to a BIP-340 signature made with k's tweaked secret.
func (m *Message) Sign(k *identity.Key) error {
	return m.sign(k, nil)
}

// SignWithAux is Sign with fixed BIP-340 auxiliary data; 32 zero bytes
// reproduce the reference vectors.
func (m *Message) SignWithAux(k *identity.Key, aux [32]byte) error {
	return m.sign(k, &aux)
}

func (m *Message) sign(k *identity.Key, aux *[32]byte) error {
	a, err := identity.ParseAddress(m.From)
	if err != nil {
		return fmt.Errorf("snap: sign: %w", err)
	}
	if a.Key != k.OutputKey() {
		return fmt.Errorf("snap: sign: %w", ErrWrongKey)
	}
	payload, err := m.canonicalPayload()
	if err != nil {
		return fmt.Errorf("snap: sign: payload: %w", err)
	}
	m.setCanonical(payload)
	sig, err := signDigest(k, digest(m, payload), aux)
	if err != nil {
		return fmt.Errorf("snap: sign: %w", err)
	}
	m.Sig = sig
	return nil
}

// signDigest signs d with k's tweaked secret, with fresh auxiliary data
// unless aux is given, and returns the signature in hex.
func signDigest(k *identity.Key, d [32]byte, aux *[32]byte) (string, error) {
	var sig [64]byte
	var err error
	if aux != nil {
		sig, err = k.SignWithAux(d, *aux)
	} else {
		sig, err = k.Sign(d)
	}
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sig[:]), nil
}

// verifySignature checks a 128-hex BIP-340 signature of digest against the
// output key pub.
func verifySignature(pub *secp.PublicKey, d [32]byte, sigHex string) bool {
	raw, ok := decodeSignature(sigHex)
	return ok && pub.Verify(d, raw)
}

// decodeSignature decodes a 128-hex BIP-340 signature.
func decodeSignature(sigHex string) (raw [64]byte, ok bool) {
	if len(sigHex) != 2*len(raw) {
		return raw, false
	}
	_, err := hex.Decode(raw[:], []byte(sigHex))
	return raw, err == nil
}
