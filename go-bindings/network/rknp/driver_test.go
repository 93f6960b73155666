// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"context"
	"fmt"
	"github.com/rknp/rknp/go-bindings/internal/testplugin"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/rknp/rknp/go-bindings/rknp"
)

func pluginPath(t *testing.T) string { return testplugin.Path(t) }

func TestParentDriver(t *testing.T) {
	d, err := NewParentDriver(ParentOpt{PluginPath: pluginPath(t), Config: rknp.Config{MTU: 1500, IPv6: true}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := d.Info(context.Background())
	if err != nil || info.Driver != DriverName || info.ChildIP.String() != "10.0.2.100" || len(info.DNS) != 2 || !info.IPv6 {
		t.Fatalf("info %+v, %v", info, err)
	}
	if d.MTU() != 1500 {
		t.Fatalf("mtu %d", d.MTU())
	}
	msg, cleanup, err := d.ConfigureNetwork(os.Getpid(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if msg.IP != "10.0.2.100" || msg.Netmask != 24 || msg.Gateway != "10.0.2.2" || msg.MTU != 1500 ||
		msg.Dev != "tap0" || len(msg.NetworkDriverOpaque) == 0 {
		t.Fatalf("message %+v", msg)
	}
	if err := cleanup(); err != nil {
		t.Fatal(err)
	}
	if err := cleanup(); err != nil { // rootlesskit may call it again
		t.Fatal(err)
	}
}

func TestParentDriverBadConfig(t *testing.T) {
	_, err := NewParentDriver(ParentOpt{PluginPath: pluginPath(t), Config: rknp.Config{MTU: 70000}})
	if err == nil || rknp.CodeOf(err) != rknp.CodeInvalidArgument {
		t.Fatalf("want invalid argument, got %v", err)
	}
}

func TestChildDriverMissingPlugin(t *testing.T) {
	c := NewChildDriver("/nonexistent/librknp.so.1")
	if info, _ := c.ChildDriverInfo(); !info.ConfiguresInterface {
		t.Fatal("the plugin configures the interface itself")
	}
	d, err := NewParentDriver(ParentOpt{PluginPath: pluginPath(t)})
	if err != nil {
		t.Fatal(err)
	}
	msg, cleanup, err := d.ConfigureNetwork(os.Getpid(), t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if _, err := c.ConfigureNetworkChild(msg, ""); err == nil {
		t.Fatal("want an error for a missing plugin")
	}
}

// TestDrivers runs both halves; the child half targets a netns the test
// creates, as with --detach-netns (root only). The parent forces the
// discard peek mode, which the port driver's info then reports.
func TestDrivers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	path := pluginPath(t)
	name := fmt.Sprintf("rknp-drv-test-%d", os.Getpid())
	if b, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, b)
	}
	defer exec.Command("ip", "netns", "del", name).Run()
	d, err := NewParentDriver(ParentOpt{PluginPath: path, Config: rknp.Config{IfName: "eth7", TCPPeek: rknp.TCPPeekDiscard}})
	if err != nil {
		t.Fatal(err)
	}
	msg, cleanup, err := d.ConfigureNetwork(os.Getpid(), t.TempDir(), "/run/netns/"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	dev, err := NewChildDriver(path).ConfigureNetworkChild(msg, "/run/netns/"+name)
	if err != nil || dev != "eth7" || msg.Dev != "eth7" {
		t.Fatalf("dev %q (msg %q), %v", dev, msg.Dev, err)
	}
	// The mode in force, once the tap is attached and the fast path on.
	pd := WithPluginInfo(fakePortDriver{}, d)
	var peek string
	for range 100 {
		info, err := pd.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if peek = info.Extra[ExtraTCPPeek]; peek != "" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if peek != "discard" {
		t.Fatalf("%s = %q with the discard mode forced", ExtraTCPPeek, peek)
	}
	// A closed parent has no mode to tell; the rest of the info stays.
	if err := cleanup(); err != nil {
		t.Fatal(err)
	}
	info, err := pd.Info(context.Background())
	if err != nil || info.Extra[ExtraPluginPath] != path {
		t.Fatalf("info after cleanup: %+v, %v", info, err)
	}
	if v, ok := info.Extra[ExtraTCPPeek]; ok {
		t.Fatalf("%s = %q after cleanup", ExtraTCPPeek, v)
	}
}
