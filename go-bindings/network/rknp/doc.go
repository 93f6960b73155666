// SPDX-License-Identifier: Apache-2.0

// Package rknp is a rootlesskit network driver backed by an rknp plugin
// library (--net=plugin): the stack runs in the parent process, the child
// creates the tap and hands it over.
//
// NewParentDriver and NewChildDriver implement rootlesskit's
// network.ParentDriver and network.ChildDriver; plug them into
// parent.Opt.NetworkDriver and child.Opt.NetworkDriver. The child is
// expected to be the same program re-executed (as rootlesskit does), so it
// loads the plugin from the same path.
//
// Like rootlesskit's own drivers (pkg/network/slirp4netns beside
// pkg/port/slirp4netns), the package is named after what it drives; it
// wraps the loader github.com/rknp/rknp/go-bindings/rknp, whose Config it
// embeds in ParentOpt, so a program that only runs the driver needs no
// other package called rknp.
package rknp
