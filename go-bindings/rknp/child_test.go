// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestHandover runs both halves in this process: the child side configures
// a tap in a network namespace the test creates (root only).
func TestHandover(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	l := openPlugin(t)
	name := fmt.Sprintf("rknp-go-test-%d", os.Getpid())
	if b, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, b)
	}
	defer exec.Command("ip", "netns", "del", name).Run()

	p, err := l.NewParent(Config{IfName: "eth7", MTU: 1500, Log: func(lv Level, m string) { t.Logf("parent %v: %s", lv, m) }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Start(t.TempDir(), os.Getpid()); err != nil {
		t.Fatal(err)
	}
	dev, err := l.ChildConfigure(p.Opaque(), "/run/netns/"+name,
		WithChildLog(func(lv Level, m string) { t.Logf("child %v: %s", lv, m) }))
	if err != nil {
		t.Fatal(err)
	}
	if dev != "eth7" {
		t.Fatalf("dev %q", dev)
	}
	// The parent acknowledges the hand-over slightly before its counters
	// say so, hence the short poll.
	var st Stats
	for i := 0; i < 100; i++ {
		if st, err = p.Stats(); err != nil || st.TapAttached {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil || !st.TapAttached {
		t.Fatalf("stats %+v, %v", st, err)
	}
	out, _ := exec.Command("ip", "-n", name, "-o", "addr", "show", "dev", "eth7").CombinedOutput()
	if !strings.Contains(string(out), "10.0.2.100/24") {
		t.Fatalf("address not configured: %s", out)
	}
	if _, err := l.ChildConfigure(p.Opaque(), "/run/netns/"+name); err == nil {
		t.Fatal("second hand-over must fail")
	}
}
