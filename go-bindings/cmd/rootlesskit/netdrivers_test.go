// SPDX-License-Identifier: Apache-2.0

package main

// --plugin-tcp, --plugin-tcp-peek and --plugin-udp reach the plugin's
// configuration; a wrong value fails before anything starts, naming the
// flag.

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/rootless-containers/rootlesskit/v3/pkg/api"
	"github.com/rootless-containers/rootlesskit/v3/pkg/port"
	"github.com/urfave/cli/v2"

	"github.com/rknp/rknp/go-bindings/internal/testplugin"
	netrknp "github.com/rknp/rknp/go-bindings/network/rknp"
	"github.com/rknp/rknp/go-bindings/rknp"
)

// infoPortDriver is a port driver whose Info has no extras of its own.
type infoPortDriver struct{ port.ParentDriver }

func (infoPortDriver) Info(context.Context) (*api.PortDriverInfo, error) {
	return &api.PortDriverInfo{Driver: "builtin"}, nil
}

func TestPluginTCPFlags(t *testing.T) {
	plugin := testplugin.Path(t)
	quietLogrus(t)
	for _, tc := range []struct {
		args    []string
		want    string // error text; "" for success
		udpPath string // rootlessctl info's rknp.udp_path on success
	}{
		{nil, "", "fast"},
		{[]string{"--plugin-tcp-peek=auto"}, "", "fast"},
		{[]string{"--plugin-tcp-peek=offset"}, "", "fast"},
		{[]string{"--plugin-tcp-peek=discard", "--plugin-tcp=fast"}, "", "fast"},
		{[]string{"--plugin-tcp-peek="}, "", "fast"},
		{[]string{"--plugin-tcp-peek=nopeek"}, `--plugin-tcp-peek: invalid TCP peek mode "nopeek": must be "auto", "offset" or "discard"`, ""},
		{[]string{"--plugin-tcp=turbo"}, `--plugin-tcp: invalid TCP path "turbo"`, ""},
		{[]string{"--plugin-udp=fast"}, "", "fast"},
		{[]string{"--plugin-udp="}, "", "fast"},
		{[]string{"--plugin-udp=slirp", "--plugin-tcp=fast"}, "", "slirp"},
		{[]string{"--plugin-udp=fast", "--plugin-disable-offload"}, "", "slirp"},
		{[]string{"--plugin-udp=turbo"}, `--plugin-udp: invalid UDP path "turbo": must be "fast" or "slirp"`, ""},
		{[]string{"--plugin-udp=tcp"}, `--plugin-udp: invalid UDP path "tcp"`, ""},
	} {
		args := append([]string{"--net=plugin", "--net-plugin=" + plugin}, tc.args...)
		runWith(t, args, func(c *cli.Context) {
			nf, err := parseNetFlags(c)
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			d, err := newParentNetDriver(c, nf, t.TempDir())
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || rknp.CodeOf(err) != rknp.CodeInvalidArgument {
					t.Errorf("%v: want an invalid argument containing %q, got %v", tc.args, tc.want, err)
				}
				return
			}
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
				return
			}
			info, err := netrknp.WithPluginInfo(infoPortDriver{}, d).Info(context.Background())
			if err != nil || info.Extra[netrknp.ExtraUDPPath] != tc.udpPath {
				t.Errorf("%v: info %+v, %v; want %s %q", tc.args, info, err, netrknp.ExtraUDPPath, tc.udpPath)
			}
			// Started and stopped again (offset fails to start on a
			// kernel without SO_PEEK_OFF).
			_, cleanup, err := d.ConfigureNetwork(os.Getpid(), t.TempDir(), "")
			if err != nil && !(rknp.CodeOf(err) == rknp.CodeUnsupported && strings.Contains(strings.Join(tc.args, " "), "offset")) {
				t.Errorf("%v: start: %v", tc.args, err)
			}
			if cleanup != nil {
				_ = cleanup()
			}
		})
	}
}
