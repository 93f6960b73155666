// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rootless-containers/rootlesskit/v3/pkg/port"

	"github.com/rknp/rknp/go-bindings/internal/testplugin"
	netrknp "github.com/rknp/rknp/go-bindings/network/rknp"
	"github.com/rknp/rknp/go-bindings/rknp"
)

func pluginPath(t *testing.T) string { return testplugin.Path(t) }

// liveDriver is the port driver on a started plugin network driver (the
// stack runs without a child: host sockets are bound, nothing is
// delivered). With TCPPathFast the TCP fast path owns TCP forwards'
// listeners (where the kernel supports it).
func liveDriver(t *testing.T, tcpPath rknp.TCPPath) port.ParentDriver {
	t.Helper()
	nd, err := netrknp.NewParentDriver(netrknp.ParentOpt{PluginPath: pluginPath(t),
		Config: rknp.Config{TCPPath: tcpPath}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewParentDriver(nil, nd)
	if errors.Is(err, rknp.ErrUnsupported) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	_, cleanup, err := nd.ConfigureNetwork(os.Getpid(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cleanup(); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() { d.(*driver).Close() }) // runs first
	return d
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func dial(port int) error {
	c, err := net.DialTimeout("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 2*time.Second)
	if err == nil {
		c.Close()
	}
	return err
}

func TestLive(t *testing.T) {
	for _, path := range []rknp.TCPPath{rknp.TCPPathDefault, rknp.TCPPathFast} {
		t.Run("tcp-path="+path.String(), func(t *testing.T) { testLive(t, path) })
	}
}

func testLive(t *testing.T, tcpPath rknp.TCPPath) {
	d := liveDriver(t, tcpPath)
	ctx := context.Background()
	hp := freePort(t)
	st, err := d.AddPort(ctx, port.Spec{Proto: "tcp", ParentIP: "127.0.0.1", ParentPort: hp, ChildPort: 80})
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(hp); err != nil {
		t.Fatalf("published port not listening: %v", err)
	}
	// Twice: refused by the driver, named by rootlesskit ID.
	if _, err := d.AddPort(ctx, port.Spec{Proto: "tcp", ParentIP: "127.0.0.1", ParentPort: hp, ChildPort: 81}); err == nil ||
		!strings.Contains(err.Error(), "conflict with ID "+strconv.Itoa(st.ID)) {
		t.Fatalf("duplicate: %v", err)
	}
	// A port another socket holds: the library's bind error.
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().(*net.TCPAddr).Port
	if _, err := d.AddPort(ctx, port.Spec{Proto: "tcp4", ParentIP: "127.0.0.1", ParentPort: busy, ChildPort: 80}); rknp.CodeOf(err) != rknp.CodeSystem ||
		!strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("busy port: %v", err)
	} else {
		t.Logf("busy port: %v", err)
	}
	// A guest address no forward can reach: multicast, broadcast.
	for _, ip := range []string{"224.0.0.5", "255.255.255.255"} {
		if _, err := d.AddPort(ctx, port.Spec{Proto: "tcp4", ParentIP: "127.0.0.1", ParentPort: freePort(t), ChildIP: ip, ChildPort: 80}); rknp.CodeOf(err) != rknp.CodeInvalidArgument {
			t.Fatalf("guest address %s: %v", ip, err)
		}
	}
	// A unicast address outside the network is routed behind the guest
	// (a container on a bridge inside the namespace): taken.
	rst, err := d.AddPort(ctx, port.Spec{Proto: "tcp4", ParentIP: "127.0.0.1", ParentPort: freePort(t), ChildIP: "10.89.0.2", ChildPort: 80})
	if err != nil {
		t.Fatalf("guest address routed behind the guest: %v", err)
	}
	if err := d.RemovePort(ctx, rst.ID); err != nil {
		t.Fatal(err)
	}
	// Wildcard "tcp": IPv4 and (if the host has it) IPv6.
	wp := freePort(t)
	wst, err := d.AddPort(ctx, port.Spec{Proto: "tcp", ParentPort: wp, ChildPort: 80})
	if err != nil {
		t.Fatal(err)
	}
	if err := dial(wp); err != nil {
		t.Fatalf("wildcard port not listening on 127.0.0.1: %v", err)
	}
	if ln6, err := net.Listen("tcp6", "[::1]:0"); err == nil { // the host has IPv6
		ln6.Close()
		c, err := net.DialTimeout("tcp6", net.JoinHostPort("::1", strconv.Itoa(wp)), 2*time.Second)
		if err != nil {
			t.Fatalf("wildcard port not listening on [::1]: %v", err)
		}
		c.Close()
	}
	ls, err := d.ListPorts(ctx)
	if err != nil || len(ls) != 2 || ls[0].ID != st.ID || ls[1].ID != wst.ID {
		t.Fatalf("list %+v, %v", ls, err)
	}
	for _, id := range []int{st.ID, wst.ID} {
		if err := d.RemovePort(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := dial(hp); err == nil {
		t.Fatal("removed port still listening")
	}
	if err := dial(wp); err == nil {
		t.Fatal("removed wildcard port still listening")
	}
	// The host port is free again.
	ln2, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(hp)))
	if err != nil {
		t.Fatalf("host port not released: %v", err)
	}
	ln2.Close()
}
