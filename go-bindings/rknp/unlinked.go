// SPDX-License-Identifier: Apache-2.0

//go:build !rknp_link

package rknp

import "errors"

// Linked returns the library this binary was linked with; without the
// rknp_link build tag there is none and a plugin path is required.
func Linked() (*Library, error) {
	return nil, errors.New("rknp: no plugin path given and the bindings were built without the rknp_link tag")
}
