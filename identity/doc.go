// Package identity holds a SNAP agent's keys and the Bitcoin P2TR addresses
// that name agents.
//
// A SNAP identity is a secp256k1 secret d. Its BIP-340 x-only public key P is
// the agent's Nostr public key; the key-path-only BIP-341 tweak of P gives the
// output key Q, and the bech32m encoding of Q (witness version 1) is the
// agent's address. SNAP messages are signed with the tweaked secret d' and
// verified against the Q decoded from the sender's address; Nostr events are
// signed with the untweaked d.
//
// Generating a key and printing its names:
//
//	k, err := identity.Generate()
//	if err != nil { ... }
//	fmt.Println(k.Address(identity.Mainnet)) // bc1p…
//	fmt.Println(k.NostrPublicKey())          // 64 hex characters: P
//
// Parsing an address names the first rule it breaks:
//
//	_, err := identity.ParseAddress("bc1q…")
//	errors.Is(err, identity.ErrWitnessVersion) // true
//
// Keys come from a file (hex, mode 0600, see LoadKeyFile), from the
// SNAPNODE_KEY variable (FromEnv) or from a BIP-39 mnemonic along the BIP-86
// path (FromMnemonic). This package knows nothing about messages.
package identity
