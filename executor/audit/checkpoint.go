package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	"github.com/btcsuite/btcd/btcec/v2/schnorr"

	"github.com/snapnode/snapnode/identity"
)

// Signer signs the checkpoints Prune records, so that a checkpoint
// rewritten by anyone without the node's key fails Verify. Sign returns a
// BIP-340 signature of digest by the key whose P2TR address Address
// returns; Address is the same on every call.
type Signer interface {
	Address() string
	Sign(digest [32]byte) ([64]byte, error)
}

// IdentitySigner is the Signer of the node's identity key k: it signs with
// the tweaked secret, as SNAP messages are, and names k's address on
// network n.
func IdentitySigner(k *identity.Key, n identity.Network) Signer {
	return keySigner{k: k, addr: k.Address(n)}
}

type keySigner struct {
	k    *identity.Key
	addr string
}

func (s keySigner) Address() string                        { return s.addr }
func (s keySigner) Sign(digest [32]byte) ([64]byte, error) { return s.k.Sign(digest) }

// checkpointDomain starts the signed encoding of a checkpoint, so that the
// signature is never one of anything else the key signs.
const checkpointDomain = "snapnode-audit-checkpoint-v1"

// CheckpointDigest returns what a pruning record's signature signs: the
// SHA-256 of
//
//	str("snapnode-audit-checkpoint-v1") str(signer)
//	i64(first_seq) str(first_prev) i64(removed)
//
// in the encoding of Hash: the first entry kept, the hash it chains to
// (the head of what was pruned), how many entries went, and who signs.
func CheckpointDigest(signer string, firstSeq int64, firstPrev string, removed int64) [32]byte {
	b := appendStr(nil, checkpointDomain)
	b = appendStr(b, signer)
	b = binary.BigEndian.AppendUint64(b, uint64(firstSeq))
	b = appendStr(b, firstPrev)
	b = binary.BigEndian.AppendUint64(b, uint64(removed))
	return sha256.Sum256(b)
}

// sign fills in d's signer and signature.
func (d *prunedDetail) sign(s Signer) error {
	d.Signer = s.Address()
	sig, err := s.Sign(CheckpointDigest(d.Signer, d.FirstSeq, d.FirstPrev, d.Removed))
	if err != nil {
		return fmt.Errorf("sign the checkpoint: %w", err)
	}
	d.Sig = hex.EncodeToString(sig[:])
	return nil
}

// checkSignature reports why d's signature does not hold ("" when it
// does, or when d is unsigned and want is empty). want, when set, is the
// only signer accepted, and a signature is then required. The signature
// is checked before its signer: other is true for a checkpoint its
// signer did sign, by another key than want.
func (d *prunedDetail) checkSignature(want string) (why string, other bool) {
	if d.Signer == "" && d.Sig == "" {
		if want != "" {
			return "the checkpoint is not signed; want a signature by " + want, false
		}
		return "", false
	}
	return signatureProblem("the checkpoint", d.Signer, d.Sig, CheckpointDigest(d.Signer, d.FirstSeq, d.FirstPrev, d.Removed), want)
}

// signatureProblem reports why sig (hex) is not signer's BIP-340
// signature of digest, or signer is not want (any signer when want is
// ""), "" when neither; what names the signed entry ("the checkpoint",
// "the seal") in the reasons. The signature is checked before its
// signer: other is true when signer did sign, but is not want.
// Checkpoints and seals are signed the same way.
func signatureProblem(what, signer, sig string, digest [32]byte, want string) (why string, other bool) {
	if why := badSignature(what, signer, sig, digest); why != "" {
		return why, false
	}
	if want != "" && signer != want {
		return fmt.Sprintf("%s is signed by %s (its signature holds), not by %s", what, signer, want), true
	}
	return "", false
}

// badSignature reports why sig (hex) is not signer's BIP-340 signature of
// digest, "" when it is.
func badSignature(what, signer, sig string, digest [32]byte) string {
	addr, err := identity.ParseAddress(signer)
	if err != nil {
		return what + "'s signer: " + err.Error()
	}
	pub, err := addr.PublicKey()
	if err != nil {
		return what + "'s signer: " + err.Error()
	}
	raw, err := hex.DecodeString(sig)
	if err != nil || len(raw) != 64 {
		return what + "'s signature is not 128 hex digits"
	}
	if _, err := schnorr.ParseSignature(raw); err != nil {
		return what + "'s signature: " + err.Error()
	}
	if !pub.Verify(digest, [64]byte(raw)) {
		return what + "'s signature does not verify for " + signer
	}
	return ""
}
