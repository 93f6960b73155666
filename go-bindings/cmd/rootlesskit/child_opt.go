// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"

	"github.com/rootless-containers/rootlesskit/v3/pkg/child"
	"github.com/rootless-containers/rootlesskit/v3/pkg/copyup/tmpfssymlink"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network/gvisortapvsock"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network/lxcusernic"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network/pasta"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network/slirp4netns"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network/vpnkit"
	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"

	"github.com/rknp/rknp/go-bindings/network/rknp"
)

// childOpt builds the child's options. The child is this binary
// re-executed by the parent with the same arguments and environment, so
// it sees the same flags (the plugin path included).
func childOpt(c *cli.Context) (child.Opt, error) {
	pidns := c.Bool("pidns")
	opt := child.Opt{
		PipeFDEnvKey:              pipeFDEnvKey,
		RunActivationHelperEnvKey: runActivationHelperEnvKey,
		ChildUseActivationEnvKey:  childUseActivationEnvKey,
		StateDirEnvKey:            stateDirEnvKey,
		TargetCmd:                 c.Args().Slice(),
		MountProcfs:               pidns,
		DetachNetNS:               c.Bool("detach-netns"),
		Propagation:               c.String("propagation"),
		EvacuateCgroup2:           c.String("evacuate-cgroup2") != "",
		CopyUpDirs:                c.StringSlice("copy-up"),
	}
	switch s := c.String("reaper"); s {
	case "auto":
		opt.Reaper = pidns
		logrus.Debugf("reaper: auto chosen value: %v", opt.Reaper)
	case "true":
		if !pidns {
			return opt, errors.New("reaper requires --pidns")
		}
		opt.Reaper = true
	case "false":
	default:
		return opt, fmt.Errorf("unknown reaper mode: %s", s)
	}
	var err error
	if opt.NetworkDriver, err = newChildNetDriver(c.String("net"), c.String("net-plugin")); err != nil {
		return opt, err
	}
	switch s := c.String("copy-up-mode"); s {
	case "tmpfs+symlink":
		opt.CopyUpDriver = tmpfssymlink.NewChildDriver()
		if len(opt.CopyUpDirs) != 0 && (opt.Propagation == "rshared" || opt.Propagation == "shared") {
			return opt, fmt.Errorf("propagation %s does not support copy-up driver %s", opt.Propagation, s)
		}
	default:
		return opt, fmt.Errorf("unknown copy-up mode: %s", s)
	}
	if opt.PortDriver, err = newChildPortDriver(c.String("port-driver")); err != nil {
		return opt, err
	}
	return opt, nil
}

// newChildNetDriver is the child half of --net (nil for host and none).
func newChildNetDriver(name, pluginPath string) (network.ChildDriver, error) {
	switch name {
	case "host", "none":
		return nil, nil
	case "plugin":
		return rknp.NewChildDriver(pluginPath), nil
	case "pasta":
		return pasta.NewChildDriver(), nil
	case "slirp4netns":
		return slirp4netns.NewChildDriver(), nil
	case "vpnkit":
		return vpnkit.NewChildDriver(), nil
	case "lxc-user-nic":
		return lxcusernic.NewChildDriver(), nil
	case "gvisor-tap-vsock":
		return gvisortapvsock.NewChildDriver(), nil
	}
	return nil, fmt.Errorf("unknown network mode: %s", name)
}
