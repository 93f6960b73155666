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

// TestTCPPeekModeInForce hands a tap over (root only, as TestHandover)
// with each Config.TCPPeek and reads the mode in force from the stats:
// auto picks one of the two, a forced mode is that mode, and offset on a
// kernel without SO_PEEK_OFF fails Start as unsupported.
func TestTCPPeekModeInForce(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	l := openPlugin(t)
	for _, mode := range []TCPPeek{TCPPeekAuto, TCPPeekOffset, TCPPeekDiscard} {
		name := mode.String()
		if name == "" {
			name = "auto"
		}
		t.Run(name, func(t *testing.T) {
			ns := fmt.Sprintf("rknp-go-peek-%d-%d", os.Getpid(), mode)
			if b, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
				t.Skipf("ip netns add: %v: %s", err, b)
			}
			defer exec.Command("ip", "netns", "del", ns).Run()
			p, err := l.NewParent(Config{TCPPeek: mode, Log: func(lv Level, m string) { t.Logf("parent %v: %s", lv, m) }})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if err := p.Start(t.TempDir(), os.Getpid()); err != nil {
				if mode == TCPPeekOffset && CodeOf(err) == CodeUnsupported {
					t.Skipf("the kernel has no SO_PEEK_OFF for TCP: %v", err)
				}
				t.Fatal(err)
			}
			if _, err := l.ChildConfigure(p.Opaque(), "/run/netns/"+ns); err != nil {
				t.Fatal(err)
			}
			var st Stats
			for i := 0; i < 100; i++ {
				if st, err = p.Stats(); err != nil || (st.TapAttached && st.TCPPeekMode != "") {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil || !st.TapAttached {
				t.Fatalf("stats %+v, %v", st, err)
			}
			switch {
			case st.TCPPeekMode == "":
				// The fast path is on (offloads, the default TCP path).
				t.Fatalf("no TCP peek mode in force with the fast path on: %+v", st)
			case mode == TCPPeekAuto && st.TCPPeekMode != "offset" && st.TCPPeekMode != "discard",
				mode != TCPPeekAuto && st.TCPPeekMode != mode.String():
				t.Fatalf("TCPPeek %q: mode in force %q", mode, st.TCPPeekMode)
			}
			t.Logf("TCPPeek %q: %q in force", mode, st.TCPPeekMode)
		})
	}
}
