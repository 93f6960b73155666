// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rootless-containers/rootlesskit/v3/pkg/port"

	"github.com/rknp/rknp/go-bindings/rknp"
)

func TestForwardsFor(t *testing.T) {
	tcp := func(host, guest string, optional bool) hostForward {
		return hostForward{fwd: rknp.Forward{Protocol: rknp.TCP, HostAddr: host, HostPort: 8080, GuestAddr: guest, GuestPort: 80}, optional: optional}
	}
	udp := func(host string, optional bool) hostForward {
		return hostForward{fwd: rknp.Forward{Protocol: rknp.UDP, HostAddr: host, HostPort: 8080, GuestPort: 80}, optional: optional}
	}
	for _, tc := range []struct {
		proto, parentIP, childIP string
		want                     []hostForward
	}{
		{"tcp", "", "", []hostForward{tcp("0.0.0.0", "", false), tcp("::", "", true)}},
		{"tcp4", "", "", []hostForward{tcp("0.0.0.0", "", false)}},
		{"tcp6", "", "", []hostForward{tcp("::", "", false)}},
		{"tcp", "127.0.0.1", "", []hostForward{tcp("127.0.0.1", "", false)}},
		{"tcp", "0.0.0.0", "", []hostForward{tcp("0.0.0.0", "", false)}},
		{"tcp", "::", "", []hostForward{tcp("::", "", false)}},
		{"tcp4", "127.0.0.1", "10.0.2.100", []hostForward{tcp("127.0.0.1", "10.0.2.100", false)}},
		{"tcp6", "::1", "", []hostForward{tcp("::1", "", false)}},
		{"tcp6", "0:0::1", "", []hostForward{tcp("::1", "", false)}}, // normalized
		{"tcp", "::ffff:127.0.0.1", "", []hostForward{tcp("127.0.0.1", "", false)}},
		{"udp", "", "", []hostForward{udp("0.0.0.0", false), udp("::", true)}},
		{"udp4", "", "", []hostForward{udp("0.0.0.0", false)}},
		{"udp6", "::1", "", []hostForward{udp("::1", false)}},
	} {
		spec := port.Spec{Proto: tc.proto, ParentIP: tc.parentIP, ParentPort: 8080, ChildIP: tc.childIP, ChildPort: 80}
		got, err := forwardsFor(spec)
		if err != nil {
			t.Errorf("%+v: %v", spec, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%+v:\n got %+v\nwant %+v", spec, got, tc.want)
		}
	}
}

func TestForwardsForErrors(t *testing.T) {
	for _, tc := range []struct {
		proto, parentIP, childIP, want string
	}{
		{"sctp", "", "", `unsupported protocol "sctp"`},
		{"sctp4", "", "", `unsupported protocol "sctp4"`},
		{"tcp4", "::1", "", "not an IPv4 address"},
		{"udp6", "127.0.0.1", "", "not an IPv6 address"},
		{"tcp", "", "127.0.0.1", "loopback ChildIP 127.0.0.1 is not supported"},
		{"tcp", "", "::1", "loopback ChildIP ::1 is not supported"},
		{"tcp", "", "fd00::100", "IPv6 ChildIP fd00::100 is not supported"},
		{"tcp", "", "bogus", `invalid ChildIP: "bogus"`},
		{"tcp", "bogus", "", `invalid ParentIP: "bogus"`},
	} {
		spec := port.Spec{Proto: tc.proto, ParentIP: tc.parentIP, ParentPort: 8080, ChildIP: tc.childIP, ChildPort: 80}
		_, err := forwardsFor(spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: want error containing %q, got %v", spec, tc.want, err)
		}
	}
}

func TestHostForwardKey(t *testing.T) {
	for h, want := range map[hostForward]string{
		{fwd: rknp.Forward{Protocol: rknp.TCP, HostAddr: "127.0.0.1", HostPort: 80}}: "tcp 127.0.0.1:80",
		{fwd: rknp.Forward{Protocol: rknp.UDP, HostAddr: "::", HostPort: 53}}:        "udp [::]:53",
	} {
		if got := h.key(); got != want {
			t.Errorf("key %q, want %q", got, want)
		}
	}
}
