// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"errors"
	"net"
	"os"
	"testing"
)

// freeTCPPort is a free loopback port for a forward's host side.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestForwards(t *testing.T) {
	l := openPlugin(t)
	p, err := l.NewParent(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !l.HasForwards() {
		if _, err := p.AddForward(Forward{HostPort: 1, GuestPort: 1}); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("want ErrUnsupported, got %v", err)
		}
		t.Skip("library without port forwarding (ABI 1.0)")
	}
	if _, err := p.AddForward(Forward{HostAddr: "127.0.0.1", HostPort: 1, GuestPort: 80}); CodeOf(err) != CodeState {
		t.Fatalf("before Start: want state error, got %v", err)
	}
	if err := p.Start(t.TempDir(), os.Getpid()); err != nil {
		t.Fatal(err)
	}
	port := freeTCPPort(t)
	id, err := p.AddForward(Forward{Protocol: TCP, HostAddr: "127.0.0.1", HostPort: port, GuestPort: 80})
	if err != nil {
		t.Fatal(err)
	}
	fw, err := p.Forwards()
	if err != nil || len(fw) != 1 || fw[0].ID != id || fw[0].HostPort != port || fw[0].GuestPort != 80 {
		t.Fatalf("forwards %+v, %v", fw, err)
	}
	if _, err := p.AddForward(Forward{Protocol: TCP, HostAddr: "127.0.0.1", HostPort: port, GuestPort: 81}); err == nil {
		t.Fatal("duplicate forward accepted")
	}
	if err := p.RemoveForward(id); err != nil {
		t.Fatal(err)
	}
	if err := p.RemoveForward(id); CodeOf(err) != CodeInvalidArgument {
		t.Fatalf("removing twice: want invalid argument, got %v", err)
	}
	if fw, _ := p.Forwards(); len(fw) != 0 {
		t.Fatalf("forwards left: %+v", fw)
	}
}

// ABI 1.7: an IPv6 guest address (here one routed behind the guest, as a
// container on a dual-stack bridge) is listed in full.
func TestForwardIPv6Guest(t *testing.T) {
	l := openPlugin(t)
	if major, minor := l.ABIVersion(); major == 1 && minor < 7 {
		t.Skip("library before ABI 1.7")
	}
	p, err := l.NewParent(Config{IPv6: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(t.TempDir(), os.Getpid()); err != nil {
		t.Fatal(err)
	}
	port := freeTCPPort(t)
	if _, err := p.AddForward(Forward{Protocol: TCP, HostAddr: "127.0.0.1", HostPort: port,
		GuestAddr: "fd00:aaaa::2", GuestPort: 80}); err != nil {
		t.Fatal(err)
	}
	fw, err := p.Forwards()
	if err != nil || len(fw) != 1 || fw[0].GuestAddr != "fd00:aaaa::2" {
		t.Fatalf("forwards %+v, %v", fw, err)
	}
}
