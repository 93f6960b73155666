// SPDX-License-Identifier: Apache-2.0

//go:build rknp_link

package rknp

/*
// The bundled header (listed first) declares what these bindings were
// written against; pkg-config supplies the library to link.
#cgo CFLAGS: -I${SRCDIR}
#cgo pkg-config: rknp
#include "rknp.h"
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

var linked = sync.OnceValues(func() (*Library, error) {
	api := C.rknp_get_api(C.uint32_t(ABIMajor))
	if api == nil {
		return nil, fmt.Errorf("rknp: linked library: major %d: %w", ABIMajor, ErrABIMajor)
	}
	return newLibrary("", unsafe.Pointer(api))
})

// Linked returns the library this binary was linked with (build tag
// rknp_link, found with pkg-config).
func Linked() (*Library, error) { return linked() }
