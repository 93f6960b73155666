// SPDX-License-Identifier: Apache-2.0

// Package plugin is a rootlesskit port driver for --net=plugin: ports are
// forwarded by the rknp plugin's libslirp stack, which already runs in the
// parent, so there is no proxy process and nothing to do in the child.
//
// The source IP is not reliably propagated: libslirp shows clients on the
// host's loopback as the gateway (e.g. 10.0.2.2), other clients with their
// own address. Info reports PortDriverInfo.Extra["sourceIPPropagated"] =
// "false". With --disable-host-loopback, libslirp drops UDP replies to
// loopback clients.
package plugin
