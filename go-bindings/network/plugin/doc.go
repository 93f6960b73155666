// SPDX-License-Identifier: Apache-2.0

// Package plugin is a rootlesskit network driver backed by an rknp plugin
// library: the stack runs in the parent process, the child creates the tap
// and hands it over.
//
// NewParentDriver and NewChildDriver implement rootlesskit's
// network.ParentDriver and network.ChildDriver; plug them into
// parent.Opt.NetworkDriver and child.Opt.NetworkDriver. The child is
// expected to be the same program re-executed (as rootlesskit does), so it
// loads the plugin from the same path.
package plugin
