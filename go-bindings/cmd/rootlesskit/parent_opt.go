// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/rootless-containers/rootlesskit/v3/pkg/parent"
	"github.com/rootless-containers/rootlesskit/v3/pkg/port/portutil"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/rknp/rknp/go-bindings/network/rknp"
)

// netFlags are the driver-independent network flags, validated once.
type netFlags struct {
	driver              string
	mtu                 int
	cidr                *net.IPNet
	ifname              string
	ipv6                bool
	disableHostLoopback bool
	detach              bool
}

func parentOpt(c *cli.Context) (parent.Opt, error) {
	opt := parent.Opt{
		PipeFDEnvKey:             pipeFDEnvKey,
		StateDirEnvKey:           stateDirEnvKey,
		ChildUseActivationEnvKey: childUseActivationEnvKey,
		ParentEUIDEnvKey:         parentEUIDEnvKey,
		ParentEGIDEnvKey:         parentEGIDEnvKey,
		CreatePIDNS:              c.Bool("pidns"),
		CreateCgroupNS:           c.Bool("cgroupns"),
		CreateUTSNS:              c.Bool("utsns"),
		CreateIPCNS:              c.Bool("ipcns"),
		DetachNetNS:              c.Bool("detach-netns"),
		Propagation:              c.String("propagation"),
		EvacuateCgroup2:          c.String("evacuate-cgroup2"),
		SubidSource:              parent.SubidSource(c.String("subid-source")),
	}
	if opt.EvacuateCgroup2 != "" && !opt.CreateCgroupNS {
		return opt, errors.New("evacuate-cgroup2 requires --cgroupns")
	}
	if opt.EvacuateCgroup2 != "" && !opt.CreatePIDNS {
		return opt, errors.New("evacuate-cgroup2 requires --pidns")
	}
	var err error
	if opt.StateDir, err = stateDir(c.String("state-dir")); err != nil {
		return opt, err
	}
	nf, err := parseNetFlags(c)
	if err != nil {
		return opt, err
	}
	if err = checkPortDriverNet(c.String("port-driver"), nf.driver); err != nil {
		return opt, err
	}
	if opt.NetworkDriver, err = newParentNetDriver(c, nf, opt.StateDir); err != nil {
		return opt, err
	}
	if opt.PortDriver, err = newParentPortDriver(c, nf, opt.StateDir, opt.NetworkDriver); err != nil {
		return opt, err
	}
	// With --net=plugin, `rootlessctl info` names the plugin (path and
	// versions) in the port driver's extra details.
	opt.PortDriver = rknp.WithPluginInfo(opt.PortDriver, opt.NetworkDriver)
	for _, s := range c.StringSlice("publish") {
		spec, err := portutil.ParsePortSpec(s)
		if err != nil {
			return opt, err
		}
		if err := portutil.ValidatePortSpec(*spec, nil); err != nil {
			return opt, err
		}
		opt.PublishPorts = append(opt.PublishPorts, *spec)
	}
	return opt, nil
}

// stateDir creates a temporary state directory unless one is given.
func stateDir(s string) (string, error) {
	if s == "" {
		d, err := os.MkdirTemp("", "rootlesskit")
		if err != nil {
			return "", fmt.Errorf("creating a state directory: %w", err)
		}
		return d, nil
	}
	d, err := filepath.Abs(s)
	if err != nil {
		return "", err
	}
	return d, parent.InitStateDir(d)
}

func parseNetFlags(c *cli.Context) (netFlags, error) {
	nf := netFlags{
		driver:              c.String("net"),
		mtu:                 c.Int("mtu"),
		ifname:              c.String("ifname"),
		ipv6:                c.Bool("ipv6"),
		disableHostLoopback: c.Bool("disable-host-loopback"),
		detach:              c.Bool("detach-netns"),
	}
	if nf.mtu < 0 || nf.mtu > 65521 { // 0: the driver's default
		return nf, fmt.Errorf("mtu must be <= 65521, got %d", nf.mtu)
	}
	if s := c.String("cidr"); s != "" {
		ip, ipnet, err := net.ParseCIDR(s)
		if err != nil {
			return nf, err
		}
		if !ip.Equal(ipnet.IP) {
			return nf, errors.New("cidr must be like 10.0.2.0/24, not like 10.0.2.100/24")
		}
		nf.cidr = ipnet
	}
	if strings.Contains(nf.ifname, "/") {
		return nf, errors.New("ifname must not contain \"/\"")
	}
	if nf.ipv6 {
		logrus.Warn("ipv6 is experimental")
		switch nf.driver {
		case "plugin", "pasta", "slirp4netns":
		default:
			logrus.Warnf("--ipv6 is discarded for --net=%s", nf.driver)
		}
	}
	if !nf.disableHostLoopback && nf.driver != "host" && nf.driver != "none" {
		logrus.Warn("specifying --disable-host-loopback is highly recommended to prohibit connecting to 127.0.0.1:* on the host namespace (requires plugin, pasta, slirp4netns, or VPNKit)")
	}
	return nf, nil
}
