// Package sshauth decides who may log in on the SSH port (--ssh-listen):
// public keys from an OpenSSH authorized_keys file (with the from=,
// restrict, no-pty, pty and no-*-forwarding options), user certificates
// signed by a CA of a TrustedUserCAKeys file (certs.go) under a login name
// that is both one of the certificate's principals and one of
// --ssh-cert-principals, and, optionally, one password checked against a
// bcrypt hash read from a file.
//
// The files are read again when they change (checked at each login and by
// Health) and on SIGHUP (Reload). A file that can no longer be read or
// parsed fails closed: nothing it vouched for is admitted until a version
// that loads replaces it, and it is logged at error level and reported by
// Health (files.go). Failed attempts are delayed per source address; every
// attempt is logged and counted. The SSH core (package sshd) takes the
// callbacks of an Auth; the permissions a key grants travel to its
// sessions (no-pty).
package sshauth
