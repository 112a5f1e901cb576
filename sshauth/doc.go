// Package sshauth decides who may log in on the SSH port (--ssh-listen):
// public keys from an OpenSSH authorized_keys file (reloaded when it changes,
// with the from=, restrict, no-pty, pty and no-*-forwarding options), user
// certificates signed by a CA of a TrustedUserCAKeys file (certs.go) and,
// optionally, one password checked against a bcrypt hash read from a file.
// Failed attempts are delayed per source address; every attempt is logged
// and counted. The SSH core (package sshd) takes the callbacks of an Auth;
// the permissions a key grants travel to its sessions (no-pty).
package sshauth
