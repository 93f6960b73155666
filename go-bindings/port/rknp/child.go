// SPDX-License-Identifier: Apache-2.0

package rknp

import "github.com/rootless-containers/rootlesskit/v3/pkg/port"

type childDriver struct{}

// NewChildDriver returns the child half of --port-driver=plugin, which has
// nothing to do: the parent's stack delivers forwarded connections to the
// tap.
func NewChildDriver() port.ChildDriver { return childDriver{} }

func (childDriver) RunChildDriver(opaque map[string]string, quit <-chan struct{}, detachedNetNSPath string) error {
	<-quit
	return nil
}
