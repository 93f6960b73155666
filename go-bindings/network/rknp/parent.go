// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/rootless-containers/rootlesskit/v3/pkg/api"
	"github.com/rootless-containers/rootlesskit/v3/pkg/messages"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network"
	"github.com/sirupsen/logrus"

	"github.com/rknp/rknp/go-bindings/rknp"
)

// DriverName is the name reported by the API (`rootlessctl info`).
const DriverName = "plugin"

// ParentOpt configures the parent driver. The library's Config is
// embedded, so its fields (opt.MTU, opt.TCPPath, ...) are set here
// directly; Log defaults to logrus.
type ParentOpt struct {
	PluginPath string // "" for the linked library (rknp_link builds)
	rknp.Config
}

type parentDriver struct {
	lib     *rknp.Library
	parent  *rknp.Parent
	net     rknp.Network
	ipv6    bool
	udpPath string // for ExtraUDPPath: "fast" or "slirp"
}

// NewParentDriver loads the plugin and validates the configuration now, so
// bad flags fail before the child is spawned.
func NewParentDriver(opt ParentOpt) (network.ParentDriver, error) {
	lib, err := rknp.Open(opt.PluginPath)
	if err != nil {
		return nil, err
	}
	cfg := opt.Config
	if cfg.Log == nil {
		cfg.Log = Logrus("network/plugin")
	}
	p, err := lib.NewParent(cfg)
	if err != nil {
		return nil, err
	}
	n, err := p.Network()
	if err != nil {
		p.Close()
		return nil, err
	}
	return &parentDriver{lib: lib, parent: p, net: n, ipv6: cfg.IPv6, udpPath: udpPath(lib, cfg)}, nil
}

// udpPath is the UDP path a network of cfg runs on lib: the fast path
// unless libslirp is asked for, the tap has no offloads (the fast path
// needs its vnet headers) or the library predates ABI 1.5 (no UDP fast
// path).
func udpPath(lib *rknp.Library, cfg rknp.Config) string {
	if _, minor := lib.ABIVersion(); minor < 5 || cfg.UDPPath == rknp.UDPPathSlirp || cfg.DisableOffload {
		return rknp.UDPPathSlirp.String()
	}
	return rknp.UDPPathFast.String()
}

func (d *parentDriver) Info(ctx context.Context) (*api.NetworkDriverInfo, error) {
	dns := make([]net.IP, 0, len(d.net.DNS))
	for _, s := range d.net.DNS {
		dns = append(dns, net.ParseIP(s))
	}
	return &api.NetworkDriverInfo{
		Driver:         DriverName,
		DNS:            dns,
		ChildIP:        net.ParseIP(d.net.IP),
		DynamicChildIP: false,
		IPv6:           d.ipv6,
	}, nil
}

func (d *parentDriver) MTU() int { return d.net.MTU }

// ConfigureNetwork starts the stack; the child side creates the tap itself
// (also with --detach-netns), so detachedNetNSPath is not needed here.
func (d *parentDriver) ConfigureNetwork(childPID int, stateDir, detachedNetNSPath string) (*messages.ParentInitNetworkDriverCompleted, func() error, error) {
	if err := d.parent.Start(stateDir, childPID); err != nil {
		return nil, d.close, err
	}
	// Which plugin serves the network, at info level (the library's own
	// start lines are debug output for rootlesskit).
	logrus.WithField("driver", DriverName).Infof("network/plugin: started %s",
		describe(d.lib, libslirpVersion(d.lib, d.net)))
	msg := &messages.ParentInitNetworkDriverCompleted{
		Dev:                 d.net.IfName,
		IP:                  d.net.IP,
		Netmask:             d.net.PrefixLen,
		Gateway:             d.net.Gateway,
		DNS:                 append([]string(nil), d.net.DNS...),
		MTU:                 d.net.MTU,
		NetworkDriverOpaque: d.parent.Opaque(),
	}
	return msg, d.close, nil
}

// close is the cleanup rootlesskit defers; it may run more than once
// (Parent.Close is idempotent and never fails).
func (d *parentDriver) close() error { return d.parent.Close() }

// ForwardingParent returns the rknp parent behind d, for the plugin port
// driver (port/rknp) to add forwards through. d must come from
// NewParentDriver and its library must implement port forwarding. The
// forwards work from ConfigureNetwork until rootlesskit's network cleanup
// closes the parent.
func ForwardingParent(d network.ParentDriver) (*rknp.Parent, error) {
	pd, ok := d.(*parentDriver)
	if !ok {
		return nil, errors.New("not the plugin network driver")
	}
	if !pd.lib.HasForwards() {
		major, minor := pd.lib.ABIVersion()
		return nil, fmt.Errorf("the plugin library %s (ABI %d.%d) has no port forwarding: %w",
			pd.lib.Path(), major, minor, rknp.ErrUnsupported)
	}
	return pd.parent, nil
}
