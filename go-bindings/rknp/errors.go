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
)

// Code is an rknp_status.
type Code int32

// Status codes of abi/rknp.h.
const (
	CodeOK              Code = C.RKNP_OK
	CodeInvalidArgument Code = C.RKNP_ERR_INVALID_ARGUMENT
	CodeState           Code = C.RKNP_ERR_STATE
	CodeSystem          Code = C.RKNP_ERR_SYSTEM
	CodePermission      Code = C.RKNP_ERR_PERMISSION
	CodeTimeout         Code = C.RKNP_ERR_TIMEOUT
	CodeUnsupported     Code = C.RKNP_ERR_UNSUPPORTED
	CodeProtocol        Code = C.RKNP_ERR_PROTOCOL
	CodeInternal        Code = C.RKNP_ERR_INTERNAL
)

var codeNames = map[Code]string{
	CodeOK: "ok", CodeInvalidArgument: "invalid argument", CodeState: "invalid state",
	CodeSystem: "system error", CodePermission: "permission denied", CodeTimeout: "timeout",
	CodeUnsupported: "unsupported", CodeProtocol: "protocol error", CodeInternal: "internal error",
}

func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("status %d", int32(c))
}

// Error is a failure reported by the library: its status code and message.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Message + " (" + e.Code.String() + ")"
}

// CodeOf returns the Code of the first *Error in err's chain, or CodeOK.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeOK
}

// takeError converts a failed status and its rknp_error into a Go error and
// frees the rknp_error (always, whatever st is).
func (l *Library) takeError(st C.rknp_status, cerr *C.rknp_error) error {
	if cerr == nil {
		if st == C.RKNP_OK {
			return nil
		}
		return &Error{Code: Code(st)}
	}
	defer C.rknp_go_error_free(l.api, cerr)
	if st == C.RKNP_OK {
		return nil
	}
	return &Error{
		Code:    Code(C.rknp_go_error_code(l.api, cerr)),
		Message: C.GoString(C.rknp_go_error_message(l.api, cerr)),
	}
}
