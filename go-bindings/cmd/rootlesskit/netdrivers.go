// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"

	"github.com/rootless-containers/rootlesskit/v3/pkg/network"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network/gvisortapvsock"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network/lxcusernic"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network/none"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network/pasta"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network/slirp4netns"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network/vpnkit"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/rknp/rknp/go-bindings/network/rknp"
)

// newParentNetDriver builds the parent half of --net (nil for host).
func newParentNetDriver(c *cli.Context, nf netFlags, stateDir string) (network.ParentDriver, error) {
	portDriver := c.String("port-driver")
	switch nf.driver {
	case "host":
		if nf.mtu != 0 {
			logrus.Warnf("unsupported mtu for --net=host: %d", nf.mtu)
		}
		if nf.cidr != nil {
			return nil, errors.New("custom cidr is not supported for --net=host")
		}
		if nf.ifname != "" {
			return nil, errors.New("ifname cannot be specified for --net=host")
		}
		return nil, nil
	case "none":
		if nf.mtu != 0 {
			logrus.Warnf("unsupported mtu for --net=none: %d", nf.mtu)
		}
		if nf.cidr != nil {
			return nil, errors.New("custom cidr is not supported for --net=none")
		}
		if nf.ifname != "" {
			return nil, errors.New("ifname cannot be specified for --net=none")
		}
		if portDriver != "none" && portDriver != "builtin" {
			return nil, errors.New("network \"none\" requires either port driver \"none\" or \"builtin\"")
		}
		return none.NewParentDriver()
	case "plugin":
		return newPluginParent(c, nf)
	case "pasta":
		logrus.Warn("\"pasta\" network driver is experimental. Needs very recent version of pasta (see docs/network.md).")
		bin := c.String("pasta-binary")
		if _, err := exec.LookPath(bin); err != nil {
			return nil, err
		}
		var implicit bool
		switch portDriver {
		case "none", "pesto":
		case "implicit":
			implicit = true
		default:
			return nil, errors.New("network \"pasta\" requires port driver \"none\" or \"implicit\" or \"pesto\"")
		}
		pestoSock := ""
		if portDriver == "pesto" {
			pestoSock = filepath.Join(stateDir, ".pasta.sock")
		}
		return pasta.NewParentDriver(debugWriter{"network/pasta"}, bin, nf.mtu, nf.cidr, nf.ifname, pestoSock, nf.disableHostLoopback, nf.ipv6, implicit)
	case "slirp4netns":
		return newSlirp4netnsParent(c, nf, stateDir)
	case "vpnkit":
		if nf.cidr != nil {
			return nil, errors.New("custom cidr is not supported for --net=vpnkit")
		}
		bin := c.String("vpnkit-binary")
		if _, err := exec.LookPath(bin); err != nil {
			return nil, err
		}
		return vpnkit.NewParentDriver(bin, nf.mtu, nf.ifname, nf.disableHostLoopback), nil
	case "lxc-user-nic":
		logrus.Warn("\"lxc-user-nic\" network driver is experimental")
		if nf.cidr != nil {
			return nil, errors.New("custom cidr is not supported for --net=lxc-user-nic")
		}
		if !nf.disableHostLoopback {
			logrus.Warn("--disable-host-loopback is implicitly set for lxc-user-nic")
		}
		bin := c.String("lxc-user-nic-binary")
		if _, err := exec.LookPath(bin); err != nil {
			return nil, err
		}
		return lxcusernic.NewParentDriver(bin, nf.mtu, c.String("lxc-user-nic-bridge"), nf.ifname)
	case "gvisor-tap-vsock":
		logrus.Warn("\"gvisor-tap-vsock\" network driver is experimental")
		if nf.disableHostLoopback {
			logrus.Warn("\"--disable-host-loopback\" is not yet supported for gvisor-tap-vsock")
		}
		if nf.ipv6 {
			return nil, errors.New("--ipv6 is not supported for gvisor-tap-vsock")
		}
		cidr := nf.cidr
		if cidr == nil {
			_, cidr, _ = net.ParseCIDR("10.0.2.0/24")
		}
		return gvisortapvsock.NewParentDriver(debugWriter{"network/gvisor-tap-vsock"}, nf.mtu, cidr, nf.ifname, nf.disableHostLoopback, nf.ipv6)
	}
	return nil, fmt.Errorf("unknown network mode: %s", nf.driver)
}

// newPluginParent maps the flags onto the plugin's configuration; the
// library validates the values and names the offending option.
func newPluginParent(c *cli.Context, nf netFlags) (network.ParentDriver, error) {
	opt := rknp.ParentOpt{PluginPath: c.String("net-plugin")}
	opt.MTU = nf.mtu
	opt.IfName = nf.ifname
	opt.DisableHostLoopback = nf.disableHostLoopback
	opt.IPv6 = nf.ipv6
	opt.IPv6Address = c.String("plugin-ipv6-address")
	opt.DisableDNS = c.Bool("plugin-disable-dns")
	opt.DisableOffload = c.Bool("plugin-disable-offload")
	opt.EnableDHCP = c.Bool("plugin-enable-dhcp")
	opt.DisableSandbox = c.Bool("plugin-disable-sandbox")
	opt.OutboundAddr = c.String("plugin-outbound-addr")
	opt.OutboundAddr6 = c.String("plugin-outbound-addr6")
	opt.MACAddress = c.String("plugin-mac-address")
	opt.MaxFlows = c.Int("plugin-max-flows")
	opt.MaxNewFlowsPerSec = c.Int("plugin-max-new-flows-per-sec")
	if nf.cidr != nil {
		opt.CIDR = nf.cidr.String()
	}
	// The values parsed here rather than by the library: the Go types are
	// the C enums.
	if err := opt.TCPPath.Set(c.String("plugin-tcp")); err != nil {
		return nil, fmt.Errorf("--net=plugin (--net-plugin=%q): --plugin-tcp: %w", opt.PluginPath, err)
	}
	if err := opt.TCPPeek.Set(c.String("plugin-tcp-peek")); err != nil {
		return nil, fmt.Errorf("--net=plugin (--net-plugin=%q): --plugin-tcp-peek: %w", opt.PluginPath, err)
	}
	if err := opt.UDPPath.Set(c.String("plugin-udp")); err != nil {
		return nil, fmt.Errorf("--net=plugin (--net-plugin=%q): --plugin-udp: %w", opt.PluginPath, err)
	}
	d, err := rknp.NewParentDriver(opt)
	if err != nil {
		return nil, fmt.Errorf("--net=plugin (--net-plugin=%q): %w", opt.PluginPath, err)
	}
	return d, nil
}

func newSlirp4netnsParent(c *cli.Context, nf netFlags, stateDir string) (network.ParentDriver, error) {
	bin := c.String("slirp4netns-binary")
	if _, err := exec.LookPath(bin); err != nil {
		return nil, err
	}
	feat, err := slirp4netns.DetectFeatures(bin)
	if err != nil {
		return nil, err
	}
	logrus.Debugf("slirp4netns features %+v", feat)
	apiSock := ""
	if c.String("port-driver") == "slirp4netns" {
		apiSock = filepath.Join(stateDir, ".s4nn.sock")
	}
	var sandbox, seccomp bool
	switch s := c.String("slirp4netns-sandbox"); s {
	case "auto":
		// The sandbox is known not to work with --detach-netns.
		sandbox = feat.SupportsEnableSandbox && !nf.detach
	case "true":
		if nf.detach {
			return nil, errors.New("--slirp4netns-sandbox conflicts with --detach-netns")
		}
		sandbox = true
	case "false", "":
	default:
		return nil, fmt.Errorf("unsupported slirp4netns-sandbox mode: %q", s)
	}
	switch s := c.String("slirp4netns-seccomp"); s {
	case "auto":
		seccomp = feat.SupportsEnableSeccomp && feat.KernelSupportsEnableSeccomp
	case "true":
		seccomp = true
	case "false", "":
	default:
		return nil, fmt.Errorf("unsupported slirp4netns-seccomp mode: %q", s)
	}
	return slirp4netns.NewParentDriver(debugWriter{"network/slirp4netns"}, bin, nf.mtu, nf.cidr, nf.ifname,
		nf.disableHostLoopback, apiSock, sandbox, seccomp, nf.ipv6)
}
