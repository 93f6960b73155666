// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"github.com/rootless-containers/rootlesskit/v3/pkg/messages"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network"

	"github.com/rknp/rknp/go-bindings/rknp"
)

// The rootlesskit child is the same binary re-executed with the same
// arguments, so it resolves the same plugin path from its own flags.
type childDriver struct{ pluginPath string }

// NewChildDriver returns the child half; the plugin is loaded only when
// the network is configured.
func NewChildDriver(pluginPath string) network.ChildDriver {
	return &childDriver{pluginPath: pluginPath}
}

// ChildDriverInfo: the plugin sets link, MTU, address and routes itself.
func (d *childDriver) ChildDriverInfo() (*network.ChildDriverInfo, error) {
	return &network.ChildDriverInfo{ConfiguresInterface: true}, nil
}

func (d *childDriver) ConfigureNetworkChild(netmsg *messages.ParentInitNetworkDriverCompleted, detachedNetNSPath string) (string, error) {
	lib, err := rknp.Open(d.pluginPath)
	if err != nil {
		return "", err
	}
	dev, err := lib.ChildConfigure(netmsg.NetworkDriverOpaque, detachedNetNSPath,
		rknp.WithChildLog(Logrus("network/plugin(child)")))
	if err != nil {
		return "", err
	}
	netmsg.Dev = dev
	return dev, nil
}
