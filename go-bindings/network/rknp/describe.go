// SPDX-License-Identifier: Apache-2.0

package rknp

// What the plugin driver tells about the library it loaded: one line for
// logs and --version, and PortDriverInfo.Extra keys for `rootlessctl info`
// (rootlesskit's NetworkDriverInfo has no field for a driver's details).

import (
	"context"
	"fmt"
	"maps"

	"github.com/rootless-containers/rootlesskit/v3/pkg/api"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network"
	"github.com/rootless-containers/rootlesskit/v3/pkg/port"

	"github.com/rknp/rknp/go-bindings/rknp"
)

// Keys added to PortDriverInfo.Extra by WithPluginInfo.
const (
	ExtraPluginPath      = "rknp.plugin"   // file the library was loaded from
	ExtraPluginVersion   = "rknp.version"  // the library's own version
	ExtraLibslirpVersion = "rknp.libslirp" // libslirp the library runs on
	// ExtraTCPPeek is how the TCP fast path reads host sockets, the
	// --plugin-tcp-peek mode in force: "offset" or "discard" (ABI 1.4;
	// absent while the fast path is off and with older libraries).
	ExtraTCPPeek = "rknp.tcp_peek"
	// ExtraUDPPath is the UDP path the network runs: "fast", or "slirp"
	// with --plugin-udp=slirp, --plugin-disable-offload (the fast path
	// needs the tap's offloads) or a library before ABI 1.5.
	ExtraUDPPath = "rknp.udp_path"
)

// libslirpVersion is the libslirp version the library runs on: the
// network's libslirp_version (ABI 1.3), else the "(libslirp X)" part of
// the library's version string (older libraries).
func libslirpVersion(lib *rknp.Library, n rknp.Network) string {
	if n.LibslirpVersion != "" {
		return n.LibslirpVersion
	}
	_, v := lib.Versions()
	return v
}

// describe is one line naming a loaded library, e.g.
// "/usr/local/lib/librknp.so.1: rknp 1.4.0 (libslirp 4.7.0), ABI 1.4".
func describe(lib *rknp.Library, libslirp string) string {
	major, minor := lib.ABIVersion()
	path := lib.Path()
	if path == "" {
		path = "(linked)"
	}
	version, _ := lib.Versions()
	if libslirp == "" {
		libslirp = "unknown"
	}
	return fmt.Sprintf("%s: rknp %s (libslirp %s), ABI %d.%d", path, version, libslirp, major, minor)
}

// Describe loads the plugin at pluginPath ("" for the linked library) and
// describes it as describe does, for a library not running a network
// (--version): a parent with the default configuration, never started,
// tells the libslirp version. The error is rknp.Open's, unwrapped.
func Describe(pluginPath string) (string, error) {
	lib, err := rknp.Open(pluginPath)
	if err != nil {
		return "", err
	}
	var n rknp.Network
	if p, err := lib.NewParent(rknp.Config{}); err == nil {
		n, _ = p.Network()
		p.Close()
	}
	return describe(lib, libslirpVersion(lib, n)), nil
}

// WithPluginInfo wraps the port driver pd (any driver, nil for none) so
// that its Info also names the plugin behind the network driver nd, which
// must come from NewParentDriver: `rootlessctl info --json` then shows
// the plugin's path, version and libslirp version, the UDP path, and the
// TCP peek mode in force (read from the running parent's stats at each
// Info). Everything else is pd's own.
func WithPluginInfo(pd port.ParentDriver, nd network.ParentDriver) port.ParentDriver {
	d, ok := nd.(*parentDriver)
	if pd == nil || !ok {
		return pd
	}
	version, _ := d.lib.Versions()
	extra := map[string]string{ExtraPluginPath: d.lib.Path(), ExtraPluginVersion: version, ExtraUDPPath: d.udpPath}
	if v := libslirpVersion(d.lib, d.net); v != "" {
		extra[ExtraLibslirpVersion] = v
	}
	return &pluginInfoPortDriver{ParentDriver: pd, extra: extra, parent: d.parent}
}

type pluginInfoPortDriver struct {
	port.ParentDriver
	extra  map[string]string
	parent *rknp.Parent // the network's, for what is known once it runs
}

func (p *pluginInfoPortDriver) Info(ctx context.Context) (*api.PortDriverInfo, error) {
	info, err := p.ParentDriver.Info(ctx)
	if err != nil || info == nil {
		return info, err
	}
	out := *info
	out.Extra = maps.Clone(info.Extra)
	if out.Extra == nil {
		out.Extra = make(map[string]string, len(p.extra))
	}
	maps.Copy(out.Extra, p.extra)
	// A closed or not yet started parent has no mode to tell.
	if st, err := p.parent.Stats(); err == nil && st.TCPPeekMode != "" {
		out.Extra[ExtraTCPPeek] = st.TCPPeekMode
	}
	return &out, nil
}
