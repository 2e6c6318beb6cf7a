// Package deploy holds what runs snapnode as a service, checked by its
// tests: the systemd unit snapnode.service, the configuration it reads
// (snapnode.toml), and, at the repository's root, the Containerfile. The
// operator's guide (docs/operator.md) has the install steps.
package deploy
