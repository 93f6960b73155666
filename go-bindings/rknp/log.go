// SPDX-License-Identifier: Apache-2.0

package rknp

/*
#cgo CFLAGS: -I${SRCDIR}
#include "trampolines.h"
*/
import "C"

import "runtime/cgo"

// Level is a log level of the library.
type Level int32

// Log levels of abi/rknp.h.
const (
	LevelError Level = C.RKNP_LOG_ERROR
	LevelWarn  Level = C.RKNP_LOG_WARN
	LevelInfo  Level = C.RKNP_LOG_INFO
	LevelDebug Level = C.RKNP_LOG_DEBUG
)

func (l Level) String() string {
	switch l {
	case LevelError:
		return "error"
	case LevelWarn:
		return "warn"
	case LevelInfo:
		return "info"
	case LevelDebug:
		return "debug"
	}
	return "unknown"
}

// LogFunc receives the library's messages. It is called from C threads
// (the parent's stack thread among them), so it must be goroutine-safe, and
// it must not call Parent.Close.
type LogFunc func(level Level, msg string)

// logHandle wraps fn in a cgo.Handle for the C side; 0 means no logging.
// The caller deletes it once the library can no longer call back.
func logHandle(fn LogFunc) cgo.Handle {
	if fn == nil {
		return 0
	}
	return cgo.NewHandle(fn)
}
