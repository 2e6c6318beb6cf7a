package main

import (
	"fmt"

	"github.com/snapnode/snapnode/identity"
)

// keygen makes a new key, saves it when --out is given, and prints
//
//	address=<P2TR address>
//	nostr=<64 hex>
//	path=<BIP-86 path>   (with --mnemonic)
//	key=<file>           (with --out)
//	secret=<64 hex>      (without --out)
func (c *cli) keygen(args []string) int {
	fs := c.flagSet("keygen")
	out := fs.String("out", "", "save the secret to `FILE` (created with mode 0600; an existing file is never overwritten)")
	testnet := fs.Bool("testnet", false, "print the testnet (tb1p…) address, and derive along coin type 1 with --mnemonic")
	mnemonic := fs.Bool("mnemonic", false, "derive the key from a new 24-word BIP-39 mnemonic (BIP-86, index 0), printed once on stderr")
	if _, code, done := c.parse(fs, args, 0); done {
		return code
	}
	const prog = "snapnode keygen"
	n := network(*testnet)

	var (
		k      *identity.Key
		phrase string
		err    error
	)
	if *mnemonic {
		if phrase, err = identity.NewMnemonic(); err == nil {
			k, err = identity.FromMnemonic(phrase, "", n, 0)
		}
	} else {
		k, err = identity.Generate()
	}
	if err != nil {
		return c.fail(prog, err)
	}
	// Save first: when the file cannot be made, no secret is shown.
	if *out != "" {
		if err := identity.SaveKeyFile(*out, k); err != nil {
			return c.fail(prog, err)
		}
	}
	if phrase != "" {
		fmt.Fprintf(c.stderr, "WARNING: write down this recovery phrase now and keep it offline. It is shown only once,\n"+
			"and anyone who has it controls this identity (BIP-86 path %s, no passphrase).\n", identity.DerivationPath(n, 0))
		fmt.Fprintf(c.stderr, "mnemonic=%s\n", phrase)
	}
	fmt.Fprintf(c.stdout, "address=%s\n", k.Address(n))
	fmt.Fprintf(c.stdout, "nostr=%s\n", k.NostrPublicKey())
	if phrase != "" {
		fmt.Fprintf(c.stdout, "path=%s\n", identity.DerivationPath(n, 0))
	}
	if *out != "" {
		fmt.Fprintf(c.stdout, "key=%s\n", *out)
	} else {
		fmt.Fprintln(c.stderr, "WARNING: the secret= line is the private key (no --out was given). Store it safely,")
		fmt.Fprintln(c.stderr, "for example in a mode 0600 key file or in "+identity.EnvKey+", and never share it.")
		fmt.Fprintf(c.stdout, "secret=%s\n", k.Hex())
	}
	return exitOK
}
