// SPDX-License-Identifier: Apache-2.0

package rknp

// Config's TCPPath in its text form: what --plugin-tcp accepts and what
// String prints.

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
