package identity

import (
	"errors"
	"fmt"
	"strings"

	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/tyler-smith/go-bip39"
	"golang.org/x/text/unicode/norm"
)

// ErrInvalidMnemonic is returned by FromMnemonic for a mnemonic BIP-39
// does not take, or an index that is not one of a BIP-86 path.
var ErrInvalidMnemonic = errors.New("invalid mnemonic")

// NewMnemonic returns a new 24-word BIP-39 mnemonic (256 bits of entropy).
func NewMnemonic() (string, error) {
	entropy, err := bip39.NewEntropy(256)
	if err != nil {
		return "", fmt.Errorf("identity: entropy: %w", err)
	}
	m, err := bip39.NewMnemonic(entropy)
	if err != nil {
		return "", fmt.Errorf("identity: mnemonic: %w", err)
	}
	return m, nil
}

// DerivationPath returns the BIP-86 path of agent index i on network n:
// m/86'/0'/0'/0/i on mainnet, m/86'/1'/0'/0/i on testnet.
func DerivationPath(n Network, i uint32) string {
	return fmt.Sprintf("m/86'/%d'/0'/0/%d", coinType(n), i)
}

func coinType(n Network) uint32 {
	if n == Testnet {
		return 1
	}
	return 0
}

// FromMnemonic derives the key at DerivationPath(n, index) from a BIP-39
// mnemonic and optional passphrase, index below 2³¹ (the path's last
// level is not hardened). The mnemonic, in its NFKD form as BIP-39 says,
// is taken in BIP-39's one form, English words parted by single spaces,
// its checksum verified; the seed is made of the NFKD forms of the
// mnemonic and the passphrase, so that a passphrase typed composed or decomposed ("é" or
// "e\u0301") derives the same key. Errors are ErrInvalidMnemonic.
func FromMnemonic(mnemonic, passphrase string, n Network, index uint32) (*Key, error) {
	// go-bip39 checks the words parted by any white space but makes the
	// seed of the string as given: a mnemonic parted by new lines would
	// derive another key than the same words parted by spaces.
	mnemonic = norm.NFKD.String(mnemonic)
	if strings.Join(strings.Fields(mnemonic), " ") != mnemonic {
		return nil, fmt.Errorf("identity: %w: want its words parted by single spaces", ErrInvalidMnemonic)
	}
	if index >= hdkeychain.HardenedKeyStart {
		return nil, fmt.Errorf("identity: %w: index %d is over 2³¹−1, the last of %s", ErrInvalidMnemonic, index, DerivationPath(n, 0))
	}
	seed, err := bip39.NewSeedWithErrorChecking(mnemonic, norm.NFKD.String(passphrase))
	if err != nil {
		return nil, fmt.Errorf("identity: %w: %w", ErrInvalidMnemonic, err)
	}
	params := &chaincfg.MainNetParams
	if n == Testnet {
		params = &chaincfg.TestNet3Params
	}
	ek, err := hdkeychain.NewMaster(seed, params)
	if err != nil {
		return nil, fmt.Errorf("identity: master key: %w", err)
	}
	const h = hdkeychain.HardenedKeyStart
	for _, step := range []uint32{h + 86, h + coinType(n), h + 0, 0, index} {
		if ek, err = ek.Derive(step); err != nil {
			return nil, fmt.Errorf("identity: derive %s: %w", DerivationPath(n, index), err)
		}
	}
	priv, err := ek.ECPrivKey()
	if err != nil {
		return nil, fmt.Errorf("identity: derive %s: %w", DerivationPath(n, index), err)
	}
	b := priv.Key.Bytes()
	return FromBytes(b[:])
}
