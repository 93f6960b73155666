// SPDX-License-Identifier: Apache-2.0

package rknp

/*
#cgo CFLAGS: -I${SRCDIR}
#include "trampolines.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"sync"
	"unsafe"
)

// ErrClosed is returned by calls on a closed Parent.
var ErrClosed = errors.New("rknp: parent is closed")

// Parent is one user-mode stack in the parent process. All methods are
// safe for concurrent use.
type Parent struct {
	lib *Library
	// mu guards ptr: queries hold it shared, Close exclusively, so
	// rknp_parent_free never runs while another call uses the handle.
	mu   sync.RWMutex
	ptr  *C.rknp_parent
	logH cgo.Handle
}

// Network is the network the child uses.
type Network struct {
	MTU         int
	IfName      string
	IP          string // guest IPv4 address
	PrefixLen   int
	Gateway     string
	DNS         []string // IPv4 first, then IPv6; empty with DisableDNS
	IPv6Gateway string   // "" unless IPv6 is enabled
	// LibslirpVersion is the loaded libslirp's version (ABI 1.3; "" from
	// older libraries).
	LibslirpVersion string
}

// Stats are counters of a running parent.
type Stats struct {
	TapAttached      bool
	FramesFromTap    uint64
	BytesFromTap     uint64
	FramesToTap      uint64
	BytesToTap       uint64
	FramesDropped    uint64
	HandoversRefused uint64
	SegmentsMerged   uint64 // ABI 1.2; 0 from older libraries
	AcksSuperseded   uint64 // ABI 1.2; 0 from older libraries
	// ABI 1.3; 0 from older libraries.
	FramesTruncated    uint64 // guest frames longer than the read buffer
	FramesFiltered     uint64 // guest frames refused by policy (ethertype, source)
	FlowsRefused       uint64 // new guest flows refused at MaxFlows
	FlowsRateLimited   uint64 // new guest flows refused at MaxNewFlowsPerSec
	HostSockets        uint64 // host sockets held for guest flows now
	TCPFastFlows       uint64 // TCP flows on the fast path now
	TCPFastRetransmits uint64 // segments the fast path sent the guest again
	Sandbox            uint32 // RKNP_SANDBOX_* bits: 1 seccomp, 2 Landlock
	// TCPPeekMode is how the TCP fast path reads host sockets, the
	// Config.TCPPeek in force (ABI 1.4): "offset" or "discard"; "" while
	// the fast path is off (TCPPathSlirp, no offloads) and from older
	// libraries.
	TCPPeekMode string
	// ABI 1.5; 0 from older libraries.
	UDPFastFlows   uint64 // UDP flows on the fast path now
	UDPFastDropped uint64 // guest datagrams the UDP fast path dropped (host send failed)
	// ABI 1.7; 0 from older libraries. Published ports' clients, apart
	// from the guest's flows (never in FlowsRefused, FlowsRateLimited or
	// HostSockets).
	TCPForwardAccepted    uint64 // connections TCP forwards accepted
	TCPForwardRefused     uint64 // of those, closed at once (every reason)
	TCPForwardFull        uint64 // of those, at the forward's or all forwards' cap
	TCPForwardRateLimited uint64 // of those, over the forward's rate
	TCPForwardFlows       uint64 // forwarded TCP connections now
	UDPForwardClients     uint64 // UDP forwards' clients now
	UDPForwardAdmitted    uint64 // new UDP clients given a place
	UDPForwardRateLimited uint64 // new UDP clients over the forward's rate
	UDPForwardEvicted     uint64 // UDP clients evicted for a new one
	UDPForwardFull        uint64 // new UDP clients refused: no room
}

// NewParent validates cfg and creates a stopped parent.
func (l *Library) NewParent(cfg Config) (*Parent, error) {
	h := logHandle(cfg.Log)
	cc, err := l.toC(&cfg, uintptr(h))
	if err != nil {
		deleteHandle(h)
		return nil, fmt.Errorf("rknp: new parent: %w", err)
	}
	defer cc.free() // rknp_parent_new copies every string
	var p *C.rknp_parent
	var cerr *C.rknp_error
	st := C.rknp_go_parent_new(l.api, &cc.c, &p, &cerr)
	if err := l.takeError(st, cerr); err != nil {
		deleteHandle(h)
		return nil, fmt.Errorf("rknp: new parent: %w", err)
	}
	return &Parent{lib: l, ptr: p, logH: h}, nil
}

func deleteHandle(h cgo.Handle) {
	if h != 0 {
		h.Delete()
	}
}

// Start creates the hand-over socket in stateDir and starts the stack
// thread; only the process childPID may hand over its tap.
func (p *Parent) Start(stateDir string, childPID int) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.ptr == nil {
		return fmt.Errorf("rknp: start parent: %w", ErrClosed)
	}
	cdir := C.CString(stateDir)
	defer C.free(unsafe.Pointer(cdir))
	var cerr *C.rknp_error
	st := C.rknp_go_parent_start(p.lib.api, p.ptr, cdir, C.int32_t(childPID), &cerr)
	if err := p.lib.takeError(st, cerr); err != nil {
		return fmt.Errorf("rknp: start parent: %w", err)
	}
	return nil
}

// Network returns the network the child must use.
func (p *Parent) Network() (Network, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.ptr == nil {
		return Network{}, fmt.Errorf("rknp: parent network: %w", ErrClosed)
	}
	var n C.rknp_network
	var cerr *C.rknp_error
	st := C.rknp_go_parent_network(p.lib.api, p.ptr, &n, &cerr)
	if err := p.lib.takeError(st, cerr); err != nil {
		return Network{}, fmt.Errorf("rknp: parent network: %w", err)
	}
	out := Network{
		MTU:             int(n.mtu),
		IfName:          C.GoString(&n.ifname[0]),
		IP:              C.GoString(&n.ip[0]),
		PrefixLen:       int(n.prefix_len),
		Gateway:         C.GoString(&n.gateway[0]),
		IPv6Gateway:     C.GoString(&n.ipv6_gateway[0]),
		LibslirpVersion: C.GoString(&n.libslirp_version[0]),
	}
	for i := 0; i < int(n.dns_count) && i < len(n.dns); i++ {
		out.DNS = append(out.DNS, C.GoString(&n.dns[i][0]))
	}
	return out, nil
}

// Opaque returns the key/value pairs the child needs (empty before Start
// succeeded or after Close).
func (p *Parent) Opaque() map[string]string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	m := map[string]string{}
	if p.ptr == nil {
		return m
	}
	n := uint32(C.rknp_go_parent_opaque_count(p.lib.api, p.ptr))
	for i := uint32(0); i < n; i++ {
		var k, v *C.char
		var cerr *C.rknp_error
		st := C.rknp_go_parent_opaque_get(p.lib.api, p.ptr, C.uint32_t(i), &k, &v, &cerr)
		if p.lib.takeError(st, cerr) != nil {
			continue
		}
		m[C.GoString(k)] = C.GoString(v)
	}
	return m
}

// Stats returns a snapshot of the counters.
func (p *Parent) Stats() (Stats, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.ptr == nil {
		return Stats{}, fmt.Errorf("rknp: parent stats: %w", ErrClosed)
	}
	var s C.rknp_stats
	var cerr *C.rknp_error
	st := C.rknp_go_parent_stats(p.lib.api, p.ptr, &s, &cerr)
	if err := p.lib.takeError(st, cerr); err != nil {
		return Stats{}, fmt.Errorf("rknp: parent stats: %w", err)
	}
	return Stats{
		TapAttached:        s.tap_attached != 0,
		FramesFromTap:      uint64(s.frames_from_tap),
		BytesFromTap:       uint64(s.bytes_from_tap),
		FramesToTap:        uint64(s.frames_to_tap),
		BytesToTap:         uint64(s.bytes_to_tap),
		FramesDropped:      uint64(s.frames_dropped),
		HandoversRefused:   uint64(s.handovers_refused),
		SegmentsMerged:     uint64(s.segments_merged),
		AcksSuperseded:     uint64(s.acks_superseded),
		FramesTruncated:    uint64(s.frames_truncated),
		FramesFiltered:     uint64(s.frames_filtered),
		FlowsRefused:       uint64(s.flows_refused),
		FlowsRateLimited:   uint64(s.flows_rate_limited),
		HostSockets:        uint64(s.host_sockets),
		TCPFastFlows:       uint64(s.tcp_fast_flows),
		TCPFastRetransmits: uint64(s.tcp_fast_retransmits),
		Sandbox:            uint32(s.sandbox),
		TCPPeekMode:        tcpPeekModeName(uint32(s.tcp_peek_mode)),
		UDPFastFlows:       uint64(s.udp_fast_flows),
		UDPFastDropped:     uint64(s.udp_fast_dropped),

		TCPForwardAccepted:    uint64(s.tcp_forward_accepted),
		TCPForwardRefused:     uint64(s.tcp_forward_refused),
		TCPForwardFull:        uint64(s.tcp_forward_full),
		TCPForwardRateLimited: uint64(s.tcp_forward_rate_limited),
		TCPForwardFlows:       uint64(s.tcp_forward_flows),
		UDPForwardClients:     uint64(s.udp_forward_clients),
		UDPForwardAdmitted:    uint64(s.udp_forward_admitted),
		UDPForwardRateLimited: uint64(s.udp_forward_rate_limited),
		UDPForwardEvicted:     uint64(s.udp_forward_evicted),
		UDPForwardFull:        uint64(s.udp_forward_full),
	}, nil
}

// Close stops the stack and frees the parent. It is idempotent and safe
// from any goroutine, but must not be called from the Config.Log callback:
// the library refuses to free a parent from inside its log callback (the
// handle would stay allocated), and Close holds the Parent's lock, which
// a concurrent Close would wait on.
func (p *Parent) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ptr == nil {
		return nil
	}
	C.rknp_go_parent_close(p.lib.api, p.ptr)
	C.rknp_go_parent_free(p.lib.api, p.ptr)
	p.ptr = nil
	// The stack thread has exited: no more callbacks can use the handle.
	deleteHandle(p.logH)
	p.logH = 0
	return nil
}
