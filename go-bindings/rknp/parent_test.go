// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConfigValidation(t *testing.T) {
	l := openPlugin(t)
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{MTU: 70000}, "mtu"},
		{Config{CIDR: "10.0.2.0/30"}, "cidr"},
		{Config{CIDR: "bogus"}, "cidr"},
		{Config{IfName: "this-name-is-too-long"}, "ifname"},
		{Config{MACAddress: "zz"}, "mac"},
		{Config{TCPPath: 7}, "tcp path"},
		{Config{TCPPeek: 3}, "tcp peek mode"},
		{Config{TCPPeek: 255}, "tcp peek mode"},
		{Config{UDPPath: 3}, "udp path"},
		{Config{UDPPath: 255}, "udp path"},
	} {
		_, err := l.NewParent(tc.cfg)
		if err == nil {
			t.Errorf("%+v: no error", tc.cfg)
			continue
		}
		if CodeOf(err) != CodeInvalidArgument || !strings.Contains(strings.ToLower(err.Error()), tc.want) {
			t.Errorf("%+v: want invalid argument naming %q, got %v (code %v)", tc.cfg, tc.want, err, CodeOf(err))
		}
	}
}

// The library built next to these bindings speaks their minor, and the 1.2
// field reaches it (a bad value would be refused, a good one is taken).
func TestABIMinorAndDHCP(t *testing.T) {
	l := openPlugin(t)
	if major, minor := l.ABIVersion(); major != ABIMajor || minor < ABIMinor {
		t.Fatalf("library ABI %d.%d, bindings built for %d.%d", major, minor, ABIMajor, ABIMinor)
	}
	p, err := l.NewParent(Config{EnableDHCP: true})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
}

// Each UDPPath reaches the library and starts; the UDP fast path's
// counters (ABI 1.5) are 0 before any guest traffic.
func TestUDPPathAndCounters(t *testing.T) {
	l := openPlugin(t)
	for _, path := range []UDPPath{UDPPathDefault, UDPPathFast, UDPPathSlirp} {
		p, err := l.NewParent(Config{UDPPath: path})
		if err != nil {
			t.Fatalf("UDPPath %q: %v", path, err)
		}
		if err := p.Start(t.TempDir(), os.Getpid()); err != nil {
			p.Close()
			t.Fatalf("UDPPath %q: start: %v", path, err)
		}
		st, err := p.Stats()
		p.Close()
		if err != nil || st.UDPFastFlows != 0 || st.UDPFastDropped != 0 {
			t.Fatalf("UDPPath %q: stats %+v, %v", path, st, err)
		}
	}
}

func TestNetworkDefaults(t *testing.T) {
	l := openPlugin(t)
	p, err := l.NewParent(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	n, err := p.Network()
	if err != nil {
		t.Fatal(err)
	}
	if n.IP != "10.0.2.100" || n.PrefixLen != 24 || n.Gateway != "10.0.2.2" || n.MTU != 65520 ||
		n.IfName != "tap0" || len(n.DNS) != 1 || n.DNS[0] != "10.0.2.3" {
		t.Fatalf("unexpected defaults: %+v", n)
	}
	// libslirp versions look like "4.7.0".
	if !regexp.MustCompile(`^\d+\.\d+\.\d+`).MatchString(n.LibslirpVersion) {
		t.Fatalf("libslirp version %q", n.LibslirpVersion)
	}
	p6, err := l.NewParent(Config{IPv6: true, CIDR: "10.0.135.128/25", MTU: 1500, IfName: "eth7"})
	if err != nil {
		t.Fatal(err)
	}
	defer p6.Close()
	n, _ = p6.Network()
	if n.IP != "10.0.135.228" || n.PrefixLen != 25 || n.MTU != 1500 || n.IfName != "eth7" || len(n.DNS) != 2 || n.IPv6Gateway == "" {
		t.Fatalf("unexpected network: %+v", n)
	}
}

func TestStartCloseTwice(t *testing.T) {
	l := openPlugin(t)
	dir := t.TempDir()
	var mu sync.Mutex
	var logs []string
	p, err := l.NewParent(Config{Log: func(lv Level, msg string) {
		mu.Lock()
		logs = append(logs, lv.String()+": "+msg)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Opaque()) != 0 {
		t.Fatal("opaque before Start must be empty")
	}
	if err := p.Start(dir, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if err := p.Start(dir, os.Getpid()); CodeOf(err) != CodeState {
		t.Fatalf("second Start: want state error, got %v", err)
	}
	if len(p.Opaque()) == 0 {
		t.Fatal("no opaque pairs after Start")
	}
	if _, err := os.Stat(filepath.Join(dir, "rknp.sock")); err != nil {
		t.Fatal(err)
	}
	st, err := p.Stats()
	if err != nil || st.TapAttached {
		t.Fatalf("stats %+v, %v", st, err)
	}
	// Close concurrently from several goroutines: exactly one does the work.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { _ = p.Close() })
	}
	wg.Wait()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "rknp.sock")); !os.IsNotExist(err) {
		t.Fatalf("hand-over socket left behind: %v", err)
	}
	if _, err := p.Stats(); err == nil {
		t.Fatal("Stats after Close must fail")
	}
	if err := p.Start(dir, os.Getpid()); err == nil {
		t.Fatal("Start after Close must fail")
	}
	mu.Lock()
	t.Logf("%d log lines: %q", len(logs), logs)
	mu.Unlock()
}

func TestNoLeaks(t *testing.T) {
	l := openPlugin(t)
	cycle := func() {
		p, err := l.NewParent(Config{Log: func(Level, string) {}})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(t.TempDir(), os.Getpid()); err != nil {
			t.Fatal(err)
		}
		_ = p.Opaque()
		_, _ = p.Stats()
		_ = p.Close()
	}
	cycle() // warm up lazily created runtime state
	runtime.GC()
	g0, fd0 := runtime.NumGoroutine(), countFDs(t)
	for range 10 {
		cycle()
	}
	var g1, fd1 int
	for range 50 { // goroutines of finished callbacks may take a moment to exit
		runtime.GC()
		g1, fd1 = runtime.NumGoroutine(), countFDs(t)
		if g1 <= g0 && fd1 <= fd0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if g1 > g0 {
		t.Errorf("goroutines: %d before, %d after", g0, g1)
	}
	if fd1 > fd0 {
		t.Errorf("fds: %d before, %d after", fd0, fd1)
	}
}

// The 1.3 limits reach the library, which checks their range.
func TestFlowLimits(t *testing.T) {
	l := openPlugin(t)
	p, err := l.NewParent(Config{MaxFlows: 10, MaxNewFlowsPerSec: 5, DisableSandbox: true})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	_, err = l.NewParent(Config{MaxFlows: 1<<20 + 1})
	var e *Error
	if !errors.As(err, &e) || e.Message != `invalid max_flows "1048577": must be 1..1048576` {
		t.Fatalf("want the library's range error, got %v", err)
	}
	if _, err := l.NewParent(Config{MaxFlows: -1}); err == nil {
		t.Fatal("negative max flows accepted")
	}
}
