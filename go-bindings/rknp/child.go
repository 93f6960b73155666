// SPDX-License-Identifier: Apache-2.0

package rknp

/*
#cgo CFLAGS: -I${SRCDIR}
#include "trampolines.h"
*/
import "C"

import (
	"fmt"
	"sort"
	"unsafe"
)

// ChildOption tunes ChildConfigure.
type ChildOption func(*childOpts)

type childOpts struct{ log LogFunc }

// WithChildLog routes the child side's messages to fn.
func WithChildLog(fn LogFunc) ChildOption { return func(o *childOpts) { o.log = fn } }

// ChildConfigure runs in the child: it creates and configures the tap the
// opaque pairs describe (in detachedNetNSPath if set, else in the caller's
// network namespace), hands it to the parent and returns its name.
func (l *Library) ChildConfigure(opaque map[string]string, detachedNetNSPath string, opts ...ChildOption) (string, error) {
	var o childOpts
	for _, f := range opts {
		f(&o)
	}
	h := logHandle(o.log)
	defer deleteHandle(h) // the library logs only during the call

	keys := make([]string, 0, len(opaque))
	for k := range opaque {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic order for the library's logs
	n := C.uint32_t(len(keys))
	kv := C.rknp_go_kv_alloc(n)
	defer C.free(unsafe.Pointer(kv))
	var strs []*C.char
	defer func() {
		for _, s := range strs {
			C.free(unsafe.Pointer(s))
		}
	}()
	for i, k := range keys {
		ck, cv := C.CString(k), C.CString(opaque[k])
		strs = append(strs, ck, cv)
		C.rknp_go_kv_set(kv, C.uint32_t(i), ck, cv)
	}
	var cnetns *C.char
	if detachedNetNSPath != "" {
		cnetns = C.CString(detachedNetNSPath)
		strs = append(strs, cnetns)
	}
	var dev [64]C.char
	var cerr *C.rknp_error
	st := C.rknp_go_child_configure(l.api, kv, n, cnetns, C.uintptr_t(h), &dev[0], C.uint32_t(len(dev)), &cerr)
	if err := l.takeError(st, cerr); err != nil {
		return "", fmt.Errorf("rknp: child configure: %w", err)
	}
	return C.GoString(&dev[0]), nil
}
