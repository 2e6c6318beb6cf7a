package snapnostr

import (
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/nbd-wtf/go-nostr/nip44"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/bounded"
	"github.com/snapnode/snapnode/relay"
)

// sealer opens and seals NIP-44 v2 payloads for one identity, caching the
// conversation key of each peer (an ECDH and an HKDF) in a bounded cache.
type sealer struct {
	key   *identity.Key
	convs *bounded.Cache[string, [32]byte]
}

func newSealer(k *identity.Key, size int) *sealer {
	return &sealer{key: k, convs: bounded.NewCache[string, [32]byte](size)}
}

func (s *sealer) conversationKey(peer string) ([32]byte, error) {
	if ck, ok := s.convs.Get(peer); ok {
		return ck, nil
	}
	ck, err := conversationKey(s.key, peer)
	if err != nil {
		return ck, fmt.Errorf("snapnostr: conversation key with %s: %w", peer, err)
	}
	s.convs.Put(peer, ck)
	return ck, nil
}

// conversationKey is NIP-44 v2's conversation key of k and the peer's
// hex x-only public key: HKDF-Extract with SHA-256 and the salt
// "nip44-v2" of their ECDH shared x coordinate. It is what
// nip44.GenerateConversationKey computes, with the ECDH done by the
// identity key (libsecp256k1 in a node built with that tag).
func conversationKey(k *identity.Key, peer string) ([32]byte, error) {
	var ck, p [32]byte
	if len(peer) != 2*len(p) {
		return ck, fmt.Errorf("peer key is %d characters, want %d hex", len(peer), 2*len(p))
	}
	if _, err := hex.Decode(p[:], []byte(peer)); err != nil {
		return ck, fmt.Errorf("peer key: %w", err)
	}
	shared, err := k.SharedSecret(p)
	if err != nil {
		return ck, err
	}
	prk, err := hkdf.Extract(sha256.New, shared[:], []byte("nip44-v2"))
	if err != nil {
		return ck, err
	}
	copy(ck[:], prk)
	return ck, nil
}

// seal encrypts plaintext for peer. NIP-44 carries 1 to 65,535 bytes.
func (s *sealer) seal(peer string, plaintext []byte) (string, error) {
	if len(plaintext) == 0 || len(plaintext) > relay.MaxNIP44Plain {
		return "", fmt.Errorf("snapnostr: %d bytes cannot travel in NIP-44 (1 to %d)", len(plaintext), relay.MaxNIP44Plain)
	}
	ck, err := s.conversationKey(peer)
	if err != nil {
		return "", err
	}
	return nip44.Encrypt(string(plaintext), ck)
}

// open decrypts a payload from peer. A payload holding a line break is
// refused before it is decoded: NIP-44's base64 has none, Go's decoder
// skips them, and go-nostr's Decrypt indexes the first byte of what they
// decode to, which a payload of line breaks alone leaves empty (a panic).
func (s *sealer) open(peer, content string) ([]byte, error) {
	if strings.ContainsAny(content, "\r\n") {
		return nil, errors.New("snapnostr: NIP-44 open: the payload holds a line break, which its base64 cannot")
	}
	ck, err := s.conversationKey(peer)
	if err != nil {
		return nil, err
	}
	pt, err := nip44.Decrypt(content, ck)
	if err != nil {
		return nil, fmt.Errorf("snapnostr: NIP-44 open: %w", err)
	}
	return []byte(pt), nil
}
