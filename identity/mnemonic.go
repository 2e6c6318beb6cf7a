package identity

import (
	"fmt"

	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/tyler-smith/go-bip39"
)

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
// mnemonic and optional passphrase. The mnemonic's checksum is verified.
func FromMnemonic(mnemonic, passphrase string, n Network, index uint32) (*Key, error) {
	seed, err := bip39.NewSeedWithErrorChecking(mnemonic, passphrase)
	if err != nil {
		return nil, fmt.Errorf("identity: mnemonic: %w", err)
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
