// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"fmt"
	"net"
	"strings"

	"github.com/rootless-containers/rootlesskit/v3/pkg/port"

	"github.com/rknp/rknp/go-bindings/rknp"
)

// hostForward is one library forward a port spec expands to.
type hostForward struct {
	fwd rknp.Forward
	// optional: the IPv6 half of a "tcp"/"udp" wildcard spec, skipped
	// when the host has no IPv6.
	optional bool
}

// key identifies the host side of a forward (what the library refuses
// to forward twice).
func (h hostForward) key() string {
	return fmt.Sprintf("%s %s", protoName(h.fwd.Protocol), net.JoinHostPort(h.fwd.HostAddr, fmt.Sprint(h.fwd.HostPort)))
}

func protoName(p rknp.Protocol) string {
	if p == rknp.UDP {
		return "udp"
	}
	return "tcp"
}

// forwardsFor maps a validated spec (portutil.ValidatePortSpec) onto the
// library's forwards:
//
//   - Proto "tcp4"/"udp4" and "tcp6"/"udp6" fix the host address family;
//     an explicit ParentIP must be of that family.
//   - An empty ParentIP is the wildcard of the family: "0.0.0.0" for
//     "tcp4", "::" for "tcp6", and both for "tcp", which is what the
//     builtin driver's dual-stack listener accepts. libslirp binds one
//     family per socket ("::" is IPV6_V6ONLY), so "tcp" becomes two
//     forwards; the IPv6 one is skipped when the host has no IPv6.
//   - An explicit ParentIP is used as is, one forward: "tcp" with
//     "0.0.0.0" is IPv4 only, "tcp" with "::" IPv6 only (so a client may
//     publish both under separate IDs, as Docker does).
//   - ChildIP must be a unicast IPv4 address and not loopback (the library
//     checks): the guest's, another of its network, or one routed behind
//     the guest (a container on a bridge inside the child); every
//     forward is delivered through the tap. Empty is the guest's address.
func forwardsFor(spec port.Spec) ([]hostForward, error) {
	base := strings.TrimRight(spec.Proto, "46")
	family := strings.TrimPrefix(spec.Proto, base) // "", "4" or "6"
	var proto rknp.Protocol
	switch base {
	case "tcp":
		proto = rknp.TCP
	case "udp":
		proto = rknp.UDP
	default:
		return nil, fmt.Errorf("unsupported protocol %q (the plugin port driver forwards tcp and udp)", spec.Proto)
	}
	guest := ""
	if spec.ChildIP != "" {
		ip := net.ParseIP(spec.ChildIP)
		switch {
		case ip == nil:
			return nil, fmt.Errorf("invalid ChildIP: %q", spec.ChildIP)
		case ip.IsLoopback():
			return nil, fmt.Errorf("loopback ChildIP %s is not supported by the plugin port driver: "+
				"omit it (the child's address) and listen on it or on 0.0.0.0 in the child", spec.ChildIP)
		case ip.To4() == nil:
			return nil, fmt.Errorf("IPv6 ChildIP %s is not supported by the plugin port driver", spec.ChildIP)
		}
		guest = ip.To4().String()
	}
	one := func(host string) hostForward {
		return hostForward{fwd: rknp.Forward{Protocol: proto, HostAddr: host, HostPort: spec.ParentPort,
			GuestAddr: guest, GuestPort: spec.ChildPort}}
	}
	if spec.ParentIP == "" {
		switch family {
		case "4":
			return []hostForward{one("0.0.0.0")}, nil
		case "6":
			return []hostForward{one("::")}, nil
		}
		v6 := one("::")
		v6.optional = true
		return []hostForward{one("0.0.0.0"), v6}, nil
	}
	ip := net.ParseIP(spec.ParentIP)
	if ip == nil {
		return nil, fmt.Errorf("invalid ParentIP: %q", spec.ParentIP)
	}
	if v4 := ip.To4(); v4 != nil {
		if family == "6" {
			return nil, fmt.Errorf("ParentIP %s is not an IPv6 address (proto %s)", spec.ParentIP, spec.Proto)
		}
		return []hostForward{one(v4.String())}, nil
	}
	if family == "4" {
		return nil, fmt.Errorf("ParentIP %s is not an IPv4 address (proto %s)", spec.ParentIP, spec.Proto)
	}
	return []hostForward{one(ip.String())}, nil
}
