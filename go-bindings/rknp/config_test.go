// SPDX-License-Identifier: Apache-2.0

package rknp

// Config's TCPPath and UDPPath in their text form: what --plugin-tcp and
// --plugin-udp accept and what String prints.

import (
	"flag"
	"testing"
)

var _ flag.Value = (*TCPPath)(nil)

func TestTCPPathText(t *testing.T) {
	for text, want := range map[string]TCPPath{"": TCPPathDefault, "fast": TCPPathFast, "slirp": TCPPathSlirp} {
		got, err := ParseTCPPath(text)
		if err != nil || got != want {
			t.Errorf("ParseTCPPath(%q) = %v, %v; want %v", text, got, err, want)
		}
		if s := want.String(); s != text {
			t.Errorf("%d.String() = %q, want %q", uint8(want), s, text)
		}
	}
	if s := TCPPath(7).String(); s != "TCPPath(7)" {
		t.Errorf("TCPPath(7).String() = %q", s)
	}
}

func TestTCPPathParseErrors(t *testing.T) {
	for _, text := range []string{"turbo", "Fast", " fast", "default", "0"} {
		_, err := ParseTCPPath(text)
		if CodeOf(err) != CodeInvalidArgument {
			t.Errorf("ParseTCPPath(%q): want an invalid argument, got %v", text, err)
		}
	}
	_, err := ParseTCPPath("turbo")
	if want := `invalid TCP path "turbo": must be "fast" or "slirp" (invalid argument)`; err == nil || err.Error() != want {
		t.Errorf("message %v, want %s", err, want)
	}
	// A failed Set keeps the value it had.
	p := TCPPathSlirp
	if err := p.Set("turbo"); err == nil || p != TCPPathSlirp {
		t.Errorf("Set(turbo): %v, value %v", err, p)
	}
	if err := p.Set("fast"); err != nil || p != TCPPathFast {
		t.Errorf("Set(fast): %v, value %v", err, p)
	}
}

var _ flag.Value = (*UDPPath)(nil)

func TestUDPPathText(t *testing.T) {
	for text, want := range map[string]UDPPath{"": UDPPathDefault, "fast": UDPPathFast, "slirp": UDPPathSlirp} {
		got, err := ParseUDPPath(text)
		if err != nil || got != want {
			t.Errorf("ParseUDPPath(%q) = %v, %v; want %v", text, got, err, want)
		}
		if s := want.String(); s != text {
			t.Errorf("%d.String() = %q, want %q", uint8(want), s, text)
		}
	}
	if s := UDPPath(7).String(); s != "UDPPath(7)" {
		t.Errorf("UDPPath(7).String() = %q", s)
	}
	if UDPPathDefault != 0 || UDPPathFast != 1 || UDPPathSlirp != 2 {
		t.Errorf("constants %d %d %d", UDPPathDefault, UDPPathFast, UDPPathSlirp)
	}
}

func TestUDPPathParseErrors(t *testing.T) {
	for _, text := range []string{"turbo", "Fast", " fast", "default", "0", "tcp"} {
		_, err := ParseUDPPath(text)
		if CodeOf(err) != CodeInvalidArgument {
			t.Errorf("ParseUDPPath(%q): want an invalid argument, got %v", text, err)
		}
	}
	_, err := ParseUDPPath("turbo")
	if want := `invalid UDP path "turbo": must be "fast" or "slirp" (invalid argument)`; err == nil || err.Error() != want {
		t.Errorf("message %v, want %s", err, want)
	}
	// A failed Set keeps the value it had.
	p := UDPPathSlirp
	if err := p.Set("turbo"); err == nil || p != UDPPathSlirp {
		t.Errorf("Set(turbo): %v, value %v", err, p)
	}
	if err := p.Set("fast"); err != nil || p != UDPPathFast {
		t.Errorf("Set(fast): %v, value %v", err, p)
	}
	if err := p.Set(""); err != nil || p != UDPPathDefault {
		t.Errorf("Set(\"\"): %v, value %v", err, p)
	}
}

// Config's TCPPeek in its text form: what --plugin-tcp-peek accepts and
// what String prints.

var _ flag.Value = (*TCPPeek)(nil)

func TestTCPPeekText(t *testing.T) {
	for text, want := range map[string]TCPPeek{"": TCPPeekAuto, "offset": TCPPeekOffset, "discard": TCPPeekDiscard} {
		got, err := ParseTCPPeek(text)
		if err != nil || got != want {
			t.Errorf("ParseTCPPeek(%q) = %v, %v; want %v", text, got, err, want)
		}
		if s := want.String(); s != text {
			t.Errorf("%d.String() = %q, want %q", uint8(want), s, text)
		}
	}
	// The flag's spelling of the default.
	if got, err := ParseTCPPeek("auto"); err != nil || got != TCPPeekAuto {
		t.Errorf("ParseTCPPeek(auto) = %v, %v", got, err)
	}
	if s := TCPPeek(7).String(); s != "TCPPeek(7)" {
		t.Errorf("TCPPeek(7).String() = %q", s)
	}
	// The values are the C enum's.
	if TCPPeekAuto != 0 || TCPPeekOffset != 1 || TCPPeekDiscard != 2 {
		t.Errorf("constants %d %d %d", TCPPeekAuto, TCPPeekOffset, TCPPeekDiscard)
	}
}

func TestTCPPeekParseErrors(t *testing.T) {
	for _, text := range []string{"peek", "Offset", " discard", "default", "0", "1"} {
		_, err := ParseTCPPeek(text)
		if CodeOf(err) != CodeInvalidArgument {
			t.Errorf("ParseTCPPeek(%q): want an invalid argument, got %v", text, err)
		}
	}
	_, err := ParseTCPPeek("peek")
	if want := `invalid TCP peek mode "peek": must be "auto", "offset" or "discard" (invalid argument)`; err == nil || err.Error() != want {
		t.Errorf("message %v, want %s", err, want)
	}
	// A failed Set keeps the value it had.
	m := TCPPeekDiscard
	if err := m.Set("peek"); err == nil || m != TCPPeekDiscard {
		t.Errorf("Set(peek): %v, value %v", err, m)
	}
	if err := m.Set("offset"); err != nil || m != TCPPeekOffset {
		t.Errorf("Set(offset): %v, value %v", err, m)
	}
	if err := m.Set("auto"); err != nil || m != TCPPeekAuto {
		t.Errorf("Set(auto): %v, value %v", err, m)
	}
}

// rknp_stats.tcp_peek_mode as Stats.TCPPeekMode: the two modes by name,
// nothing for 0 (fast path off) and values this package does not know.
func TestTCPPeekModeName(t *testing.T) {
	for v, want := range map[uint32]string{0: "", 1: "offset", 2: "discard", 3: "", 256 + 1: "", 1 << 31: ""} {
		if got := tcpPeekModeName(v); got != want {
			t.Errorf("tcpPeekModeName(%d) = %q, want %q", v, got, want)
		}
	}
}
