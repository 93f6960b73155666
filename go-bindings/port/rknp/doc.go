// SPDX-License-Identifier: Apache-2.0

// Package rknp is a rootlesskit port driver for --net=plugin
// (--port-driver=plugin): ports are forwarded by the rknp plugin's stack,
// which already runs in the parent, so there is no proxy process and
// nothing to do in the child. NewParentDriver takes the network driver of
// package github.com/rknp/rknp/go-bindings/network/rknp, whose stack
// carries the forwards.
//
// The source IP is not reliably propagated: libslirp shows clients on the
// host's loopback as the gateway (e.g. 10.0.2.2), other clients with their
// own address. Info reports PortDriverInfo.Extra["sourceIPPropagated"] =
// "false". With --disable-host-loopback, libslirp drops UDP replies to
// loopback clients.
package rknp
