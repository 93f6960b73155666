package plugin

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
)

// Describe is one line naming a loaded library, e.g.
// "/usr/local/lib/librknp.so.1: rknp 0.1.0 (libslirp 4.7.0), ABI 1.2".
func Describe(lib *rknp.Library) string {
	major, minor := lib.ABIVersion()
	path := lib.Path()
	if path == "" {
		path = "(linked)"
	}
	return fmt.Sprintf("%s: rknp %s, ABI %d.%d", path, lib.Version(), major, minor)
}

// WithPluginInfo wraps the port driver pd (any driver, nil for none) so
// that its Info also names the plugin behind the network driver nd, which
// must come from NewParentDriver: `rootlessctl info --json` then shows
// the plugin's path, version and libslirp version. Everything else is
// pd's own.
func WithPluginInfo(pd port.ParentDriver, nd network.ParentDriver) port.ParentDriver {
	d, ok := nd.(*parentDriver)
	if pd == nil || !ok {
		return pd
	}
	version, libslirp := d.lib.Versions()
	extra := map[string]string{ExtraPluginPath: d.lib.Path(), ExtraPluginVersion: version}
	if libslirp != "" {
		extra[ExtraLibslirpVersion] = libslirp
	}
	return &pluginInfoPortDriver{ParentDriver: pd, extra: extra}
}

type pluginInfoPortDriver struct {
	port.ParentDriver
	extra map[string]string
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
	return &out, nil
}
