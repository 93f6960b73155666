// SPDX-License-Identifier: Apache-2.0

package rknp

// This file holds only the exported callback: cgo forbids C definitions in
// the preamble of a file that uses //export.

/*
#include <stdint.h>
*/
import "C"

import "runtime/cgo"

//export rknpGoLog
func rknpGoLog(handle C.uintptr_t, level C.int32_t, msg *C.char) {
	if handle == 0 {
		return
	}
	if fn, ok := cgo.Handle(handle).Value().(LogFunc); ok && fn != nil {
		fn(Level(level), C.GoString(msg))
	}
}
