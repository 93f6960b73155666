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
	"unsafe"
)

// ErrUnsupported: the loaded library predates the called function.
var ErrUnsupported = errors.New("rknp: not supported by the loaded library")

// Protocol of a forward.
type Protocol uint32

// Protocols of abi/rknp.h.
const (
	TCP Protocol = C.RKNP_PROTO_TCP
	UDP Protocol = C.RKNP_PROTO_UDP
)

// Forward is a host address:port forwarded to a guest port.
type Forward struct {
	ID        uint32 // set by the library
	Protocol  Protocol
	HostAddr  string // "" for 0.0.0.0
	HostPort  int
	GuestAddr string // "" for the guest; IPv4, or IPv6 (ABI 1.7)
	GuestPort int
}

// HasForwards reports whether the library implements port forwarding.
func (l *Library) HasForwards() bool { return C.rknp_go_has_forwards(l.api) != 0 }

// AddForward starts forwarding f on a running parent and returns its id.
func (p *Parent) AddForward(f Forward) (uint32, error) {
	if !p.lib.HasForwards() {
		return 0, fmt.Errorf("rknp: add forward: %w", ErrUnsupported)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.ptr == nil {
		return 0, fmt.Errorf("rknp: add forward: %w", ErrClosed)
	}
	var haddr, gaddr *C.char
	if f.HostAddr != "" {
		haddr = C.CString(f.HostAddr)
		defer C.free(unsafe.Pointer(haddr))
	}
	if f.GuestAddr != "" {
		gaddr = C.CString(f.GuestAddr)
		defer C.free(unsafe.Pointer(gaddr))
	}
	if f.HostPort < 0 || f.HostPort > 65535 || f.GuestPort < 0 || f.GuestPort > 65535 {
		return 0, fmt.Errorf("rknp: add forward: %w", &Error{Code: CodeInvalidArgument,
			Message: fmt.Sprintf("invalid port %d:%d", f.HostPort, f.GuestPort)})
	}
	var id C.uint32_t
	var cerr *C.rknp_error
	st := C.rknp_go_add_forward(p.lib.api, p.ptr, C.uint32_t(f.Protocol), haddr, C.uint32_t(f.HostPort),
		gaddr, C.uint32_t(f.GuestPort), &id, &cerr)
	if err := p.lib.takeError(st, cerr); err != nil {
		return 0, fmt.Errorf("rknp: add forward: %w", err)
	}
	return uint32(id), nil
}

// RemoveForward stops forward id.
func (p *Parent) RemoveForward(id uint32) error {
	if !p.lib.HasForwards() {
		return fmt.Errorf("rknp: remove forward: %w", ErrUnsupported)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.ptr == nil {
		return fmt.Errorf("rknp: remove forward: %w", ErrClosed)
	}
	var cerr *C.rknp_error
	st := C.rknp_go_remove_forward(p.lib.api, p.ptr, C.uint32_t(id), &cerr)
	if err := p.lib.takeError(st, cerr); err != nil {
		return fmt.Errorf("rknp: remove forward: %w", err)
	}
	return nil
}

// Forwards lists the active forwards, ordered by id.
func (p *Parent) Forwards() ([]Forward, error) {
	if !p.lib.HasForwards() {
		return nil, fmt.Errorf("rknp: list forwards: %w", ErrUnsupported)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.ptr == nil {
		return nil, fmt.Errorf("rknp: list forwards: %w", ErrClosed)
	}
	capacity := C.uint32_t(16)
	for {
		buf := C.rknp_go_fwd_alloc(capacity)
		var count C.uint32_t
		var cerr *C.rknp_error
		st := C.rknp_go_list_forwards(p.lib.api, p.ptr, buf, capacity, &count, &cerr)
		if err := p.lib.takeError(st, cerr); err != nil {
			C.free(unsafe.Pointer(buf))
			return nil, fmt.Errorf("rknp: list forwards: %w", err)
		}
		if count > capacity { // grew meanwhile or did not fit: retry larger
			C.free(unsafe.Pointer(buf))
			capacity = count
			continue
		}
		out := make([]Forward, 0, int(count))
		for i := C.uint32_t(0); i < count; i++ {
			fi := C.rknp_go_fwd_at(buf, i)
			// guest_addr_full (1.7) holds it in full, IPv6 too; a library
			// before 1.7 leaves it zeroed (calloc) and fills guest_addr.
			guest := C.GoString(&fi.guest_addr_full[0])
			if guest == "" {
				guest = C.GoString(&fi.guest_addr[0])
			}
			out = append(out, Forward{
				ID: uint32(fi.id), Protocol: Protocol(fi.protocol),
				HostAddr: C.GoString(&fi.host_addr[0]), HostPort: int(fi.host_port),
				GuestAddr: guest, GuestPort: int(fi.guest_port),
			})
		}
		C.free(unsafe.Pointer(buf))
		return out, nil
	}
}
