// SPDX-License-Identifier: Apache-2.0

// Command rootlesskit is upstream RootlessKit's command with one more
// network driver and port driver: --net=plugin loads an rknp plugin library
// (--net-plugin) whose libslirp stack runs inside this process, and
// --port-driver=plugin publishes ports through that stack.
//
// It is built from rootlesskit's importable packages and accepts every flag
// and driver of the upstream command at the version go.mod pins (a test
// compares them with upstream's source), so it can replace the upstream
// binary, for example for dockerd-rootless.sh. The plugin's own flags are
// --net-plugin and --plugin-*.
//
// The hidden flag --generate-man prints the rootlesskit(1) man page, made
// from the flag definitions:
//
//	rootlesskit --generate-man > rootlesskit.1
package main
