// SPDX-License-Identifier: Apache-2.0

package rknp

/*
#cgo CFLAGS: -I${SRCDIR}
#include "trampolines.h"
*/
import "C"

import (
	"fmt"
	"math"
	"time"
	"unsafe"
)

// Config configures a parent. Zero values take the library's defaults
// (MTU 65520, CIDR 10.0.2.0/24, IfName "tap0", hand-over timeout 10s).
type Config struct {
	MTU                 int
	CIDR                string  // IPv4 network such as "10.0.2.0/24"
	IfName              string  // tap name in the child
	DisableHostLoopback bool    // the gateway does not reach the host's lo
	IPv6                bool    // fd00::/64, gateway fd00::2, DNS fd00::3
	IPv6Address         string  // guest address in fd00::/64; "" for SLAAC
	DisableDNS          bool    // no DNS forwarder
	DisableOffload      bool    // plain tap frames: no TSO / checksum offload
	EnableDHCP          bool    // libslirp's DHCP server answers the guest (ABI 1.2)
	TCPPath             TCPPath // which stack carries the guest's TCP (ABI 1.2)
	OutboundAddr        string  // host IPv4 address to bind outbound connections to
	OutboundAddr6       string  // host IPv6 address to bind outbound connections to
	MACAddress          string  // tap MAC; "" lets the kernel choose
	HandoverTimeout     time.Duration
	Log                 LogFunc // nil drops the library's messages
	// ABI 1.3: 0 takes the library's default (16384 flows, 20000 new
	// flows a second); DisableSandbox runs the stack thread without its
	// seccomp filter and Landlock ruleset.
	MaxFlows          int
	MaxNewFlowsPerSec int
	DisableSandbox    bool
	// ABI 1.4: how the TCP fast path reads host sockets. A test and
	// diagnostic knob: TCPPeekAuto (the zero value) is right everywhere.
	TCPPeek TCPPeek
	// ABI 1.5: which stack carries the guest's UDP. UDPPathSlirp is what
	// older libraries do anyway, so only UDPPathFast needs 1.5.
	UDPPath UDPPath
}

// TCPPath is an RKNP_TCP_PATH_* value (ABI 1.2). Its text form is the
// --plugin-tcp flag's: "" for TCPPathDefault, "fast", "slirp".
type TCPPath uint8

const (
	// TCPPathDefault is the library's choice: the fast path since ABI 1.3,
	// libslirp in 1.2.
	TCPPathDefault TCPPath = C.RKNP_TCP_PATH_DEFAULT
	// TCPPathFast gives each guest connection its own host socket (where
	// the kernel allows it; else libslirp carries it).
	TCPPathFast TCPPath = C.RKNP_TCP_PATH_FAST
	// TCPPathSlirp leaves all TCP to libslirp.
	TCPPathSlirp TCPPath = C.RKNP_TCP_PATH_SLIRP
)

var tcpPathNames = map[TCPPath]string{TCPPathDefault: "", TCPPathFast: "fast", TCPPathSlirp: "slirp"}

// String is the text ParseTCPPath reads back; a value outside the
// constants prints as TCPPath(N).
func (p TCPPath) String() string {
	if s, ok := tcpPathNames[p]; ok {
		return s
	}
	return fmt.Sprintf("TCPPath(%d)", uint8(p))
}

// valid reports whether p is one of the constants, the values the C ABI
// defines.
func (p TCPPath) valid() bool {
	_, ok := tcpPathNames[p]
	return ok
}

// ParseTCPPath reads a --plugin-tcp value. A wrong one is an invalid
// argument, as the library would call it.
func ParseTCPPath(s string) (TCPPath, error) {
	for p, name := range tcpPathNames {
		if name == s {
			return p, nil
		}
	}
	return TCPPathDefault, &Error{Code: CodeInvalidArgument,
		Message: fmt.Sprintf("invalid TCP path %q: must be \"fast\" or \"slirp\"", s)}
}

// Set is ParseTCPPath into p, which makes *TCPPath a flag.Value.
func (p *TCPPath) Set(s string) error {
	parsed, err := ParseTCPPath(s)
	if err != nil {
		return err
	}
	*p = parsed
	return nil
}

// UDPPath is an RKNP_UDP_PATH_* value (ABI 1.5). Its text form is the
// --plugin-udp flag's: "" for UDPPathDefault, "fast", "slirp".
type UDPPath uint8

const (
	// UDPPathDefault is the library's choice: the fast path since ABI 1.5.
	UDPPathDefault UDPPath = C.RKNP_UDP_PATH_DEFAULT
	// UDPPathFast gives each guest UDP 4-tuple to an outside destination
	// its own connected host socket, datagrams batched (where the tap has
	// offloads; else libslirp carries it).
	UDPPathFast UDPPath = C.RKNP_UDP_PATH_FAST
	// UDPPathSlirp leaves all UDP to libslirp.
	UDPPathSlirp UDPPath = C.RKNP_UDP_PATH_SLIRP
)

var udpPathNames = map[UDPPath]string{UDPPathDefault: "", UDPPathFast: "fast", UDPPathSlirp: "slirp"}

// String is the text ParseUDPPath reads back; a value outside the
// constants prints as UDPPath(N).
func (p UDPPath) String() string {
	if s, ok := udpPathNames[p]; ok {
		return s
	}
	return fmt.Sprintf("UDPPath(%d)", uint8(p))
}

// valid reports whether p is one of the constants, the values the C ABI
// defines.
func (p UDPPath) valid() bool {
	_, ok := udpPathNames[p]
	return ok
}

// ParseUDPPath reads a --plugin-udp value. A wrong one is an invalid
// argument, as the library would call it.
func ParseUDPPath(s string) (UDPPath, error) {
	for p, name := range udpPathNames {
		if name == s {
			return p, nil
		}
	}
	return UDPPathDefault, &Error{Code: CodeInvalidArgument,
		Message: fmt.Sprintf("invalid UDP path %q: must be \"fast\" or \"slirp\"", s)}
}

// Set is ParseUDPPath into p, which makes *UDPPath a flag.Value.
func (p *UDPPath) Set(s string) error {
	parsed, err := ParseUDPPath(s)
	if err != nil {
		return err
	}
	*p = parsed
	return nil
}

// TCPPeek is an RKNP_TCP_PEEK_* value (ABI 1.4): how the TCP fast path
// peeks at a host socket's data the guest has not acknowledged yet. Its
// text form is the --plugin-tcp-peek flag's: "" for TCPPeekAuto (which
// ParseTCPPeek also reads as "auto"), "offset", "discard".
type TCPPeek uint8

const (
	// TCPPeekAuto probes SO_PEEK_OFF when the parent starts: TCPPeekOffset
	// where the kernel has it (Linux >= 6.9), else TCPPeekDiscard.
	TCPPeekAuto TCPPeek = C.RKNP_TCP_PEEK_AUTO
	// TCPPeekOffset uses SO_PEEK_OFF; Parent.Start fails with
	// CodeUnsupported if the kernel lacks it.
	TCPPeekOffset TCPPeek = C.RKNP_TCP_PEEK_OFFSET
	// TCPPeekDiscard peeks from the start of the receive queue, the bytes
	// already sent to the guest into a discard buffer (the method for
	// kernels before 6.9, forced on any kernel).
	TCPPeekDiscard TCPPeek = C.RKNP_TCP_PEEK_DISCARD
)

var tcpPeekNames = map[TCPPeek]string{TCPPeekAuto: "", TCPPeekOffset: "offset", TCPPeekDiscard: "discard"}

// String is the text ParseTCPPeek reads back; a value outside the
// constants prints as TCPPeek(N).
func (m TCPPeek) String() string {
	if s, ok := tcpPeekNames[m]; ok {
		return s
	}
	return fmt.Sprintf("TCPPeek(%d)", uint8(m))
}

// valid reports whether m is one of the constants, the values the C ABI
// defines.
func (m TCPPeek) valid() bool {
	_, ok := tcpPeekNames[m]
	return ok
}

// ParseTCPPeek reads a --plugin-tcp-peek value: "" or "auto", "offset",
// "discard". A wrong one is an invalid argument, as the library would
// call it.
func ParseTCPPeek(s string) (TCPPeek, error) {
	if s == "auto" {
		return TCPPeekAuto, nil
	}
	for m, name := range tcpPeekNames {
		if name == s {
			return m, nil
		}
	}
	return TCPPeekAuto, &Error{Code: CodeInvalidArgument,
		Message: fmt.Sprintf("invalid TCP peek mode %q: must be \"auto\", \"offset\" or \"discard\"", s)}
}

// Set is ParseTCPPeek into m, which makes *TCPPeek a flag.Value.
func (m *TCPPeek) Set(s string) error {
	parsed, err := ParseTCPPeek(s)
	if err != nil {
		return err
	}
	*m = parsed
	return nil
}

// tcpPeekModeName is the text of an rknp_stats.tcp_peek_mode: "offset"
// or "discard", "" for 0 (the fast path is off) and unknown values.
func tcpPeekModeName(v uint32) string {
	if v == 0 || v > math.MaxUint8 {
		return ""
	}
	return tcpPeekNames[TCPPeek(v)]
}

// cConfig is a filled rknp_config plus the C strings it points to.
type cConfig struct {
	c    C.rknp_config
	strs []*C.char
}

func (cc *cConfig) str(s string) *C.char {
	if s == "" {
		return nil
	}
	p := C.CString(s)
	cc.strs = append(cc.strs, p)
	return p
}

func (cc *cConfig) free() {
	for _, p := range cc.strs {
		C.free(unsafe.Pointer(p))
	}
	cc.strs = nil
}

// toC fills an rknp_config from cfg. Range checks are the library's job
// (its messages name the option); only values C cannot carry fail here.
func (l *Library) toC(cfg *Config, logH uintptr) (*cConfig, error) {
	// A library older than 1.2 would silently ignore these fields.
	if _, minor := l.ABIVersion(); (cfg.EnableDHCP || cfg.TCPPath != TCPPathDefault) && minor < 2 {
		return nil, fmt.Errorf("enable DHCP and TCP path need ABI 1.2, the plugin has 1.%d: %w", minor, ErrUnsupported)
	}
	if _, minor := l.ABIVersion(); (cfg.MaxFlows != 0 || cfg.MaxNewFlowsPerSec != 0 || cfg.DisableSandbox) && minor < 3 {
		return nil, fmt.Errorf("flow limits and disabling the sandbox need ABI 1.3, the plugin has 1.%d: %w", minor, ErrUnsupported)
	}
	if _, minor := l.ABIVersion(); cfg.TCPPeek != TCPPeekAuto && minor < 4 {
		return nil, fmt.Errorf("TCP peek mode %q needs ABI 1.4, the plugin has 1.%d: %w", cfg.TCPPeek, minor, ErrUnsupported)
	}
	// Older libraries carry all UDP through libslirp, as UDPPathSlirp asks.
	if _, minor := l.ABIVersion(); cfg.UDPPath == UDPPathFast && minor < 5 {
		return nil, fmt.Errorf("UDP path %q needs ABI 1.5, the plugin has 1.%d: %w", cfg.UDPPath, minor, ErrUnsupported)
	}
	if !cfg.TCPPeek.valid() {
		return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("invalid TCP peek mode %v", cfg.TCPPeek)}
	}
	if !cfg.TCPPath.valid() {
		return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("invalid TCP path %v", cfg.TCPPath)}
	}
	if !cfg.UDPPath.valid() {
		return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("invalid UDP path %v", cfg.UDPPath)}
	}
	cc := &cConfig{}
	if st := C.rknp_go_config_init(l.api, &cc.c); st != C.RKNP_OK {
		return nil, fmt.Errorf("config_init: %w", &Error{Code: Code(st)})
	}
	if cfg.MTU < 0 || cfg.MTU > 1<<31 {
		return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("invalid mtu %d", cfg.MTU)}
	}
	if cfg.MTU != 0 {
		cc.c.mtu = C.uint32_t(cfg.MTU)
	}
	if cfg.HandoverTimeout < 0 {
		return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("invalid handover timeout %v", cfg.HandoverTimeout)}
	}
	if cfg.HandoverTimeout != 0 {
		cc.c.handover_timeout_ms = C.uint32_t(max(cfg.HandoverTimeout.Milliseconds(), 1))
	}
	cc.c.cidr = cc.str(cfg.CIDR)
	cc.c.ifname = cc.str(cfg.IfName)
	cc.c.ipv6_address = cc.str(cfg.IPv6Address)
	cc.c.outbound_addr = cc.str(cfg.OutboundAddr)
	cc.c.outbound_addr6 = cc.str(cfg.OutboundAddr6)
	cc.c.mac_address = cc.str(cfg.MACAddress)
	cc.c.disable_host_loopback = cbool(cfg.DisableHostLoopback)
	cc.c.enable_ipv6 = cbool(cfg.IPv6)
	cc.c.disable_dns = cbool(cfg.DisableDNS)
	cc.c.disable_offload = cbool(cfg.DisableOffload)
	cc.c.enable_dhcp = cbool(cfg.EnableDHCP)
	cc.c.tcp_path = C.uint8_t(cfg.TCPPath)
	cc.c.disable_sandbox = cbool(cfg.DisableSandbox)
	cc.c.tcp_peek_mode = C.uint8_t(cfg.TCPPeek)
	cc.c.udp_path = C.uint8_t(cfg.UDPPath)
	for _, lim := range []struct {
		name string
		v    int
		dst  *C.uint32_t
	}{{"max flows", cfg.MaxFlows, &cc.c.max_flows}, {"max new flows per second", cfg.MaxNewFlowsPerSec, &cc.c.max_new_flows_per_sec}} {
		if lim.v < 0 || lim.v > math.MaxUint32 {
			return nil, &Error{Code: CodeInvalidArgument, Message: fmt.Sprintf("invalid %s %d", lim.name, lim.v)}
		}
		*lim.dst = C.uint32_t(lim.v)
	}
	if logH != 0 {
		C.rknp_go_config_set_log(&cc.c, C.uintptr_t(logH))
	}
	return cc, nil
}

func cbool(b bool) C.uint8_t {
	if b {
		return 1
	}
	return 0
}
