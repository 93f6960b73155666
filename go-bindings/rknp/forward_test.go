// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"errors"
	"net"
	"os"
	"testing"
)

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
	// A free loopback port for the host side.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
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
