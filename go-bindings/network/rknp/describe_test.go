// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"context"
	"errors"
	"io/fs"
	"regexp"
	"testing"

	"github.com/rootless-containers/rootlesskit/v3/pkg/api"
	"github.com/rootless-containers/rootlesskit/v3/pkg/port"

	"github.com/rknp/rknp/go-bindings/rknp"
)

// fakePortDriver is a port driver with its own Info extras.
type fakePortDriver struct{ port.ParentDriver }

func (fakePortDriver) Info(context.Context) (*api.PortDriverInfo, error) {
	return &api.PortDriverInfo{Driver: "builtin", Protos: []string{"tcp"},
		Extra: map[string]string{"sourceIPTransparentBackend": "nft"}}, nil
}

func TestWithPluginInfo(t *testing.T) {
	d, err := NewParentDriver(ParentOpt{PluginPath: pluginPath(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.(*parentDriver).close()
	inner := fakePortDriver{}
	info, err := WithPluginInfo(inner, d).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Driver != "builtin" || info.Extra["sourceIPTransparentBackend"] != "nft" {
		t.Fatalf("the port driver's own info is lost: %+v", info)
	}
	if info.Extra[ExtraPluginPath] != pluginPath(t) {
		t.Fatalf("%s = %q, want %q", ExtraPluginPath, info.Extra[ExtraPluginPath], pluginPath(t))
	}
	if !regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(info.Extra[ExtraPluginVersion]) ||
		!regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+$`).MatchString(info.Extra[ExtraLibslirpVersion]) {
		t.Fatalf("versions %+v", info.Extra)
	}
	// Not started: no peek mode in force.
	if v, ok := info.Extra[ExtraTCPPeek]; ok {
		t.Fatalf("%s = %q before the network started", ExtraTCPPeek, v)
	}
	// The default UDP path is known from the configuration.
	if v := info.Extra[ExtraUDPPath]; v != "fast" {
		t.Fatalf("%s = %q with the default configuration", ExtraUDPPath, v)
	}
	again, _ := inner.Info(context.Background())
	if len(again.Extra) != 1 {
		t.Fatalf("the port driver's map was changed: %+v", again.Extra)
	}
	if WithPluginInfo(nil, d) != nil {
		t.Fatal("no port driver must stay none")
	}
	if WithPluginInfo(inner, nil) != port.ParentDriver(inner) {
		t.Fatal("other network drivers must leave the port driver alone")
	}
	pd := d.(*parentDriver)
	if info.Extra[ExtraLibslirpVersion] != pd.net.LibslirpVersion {
		t.Fatalf("libslirp %q, the ABI's network says %q", info.Extra[ExtraLibslirpVersion], pd.net.LibslirpVersion)
	}
	want := regexp.MustCompile(`^.+: rknp [0-9.]+ \(libslirp ` + regexp.QuoteMeta(pd.net.LibslirpVersion) + `\), ABI 1\.[0-9]+$`)
	if s, err := Describe(pluginPath(t)); err != nil || !want.MatchString(s) {
		t.Fatalf("Describe: %q, %v", s, err)
	}
	if _, err := Describe("/nonexistent/librknp.so.1"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Describe of a missing file: %v", err)
	}
	// A library before ABI 1.3 has no libslirp_version: the version
	// string's "(libslirp X)" is used.
	if s := describe(pd.lib, libslirpVersion(pd.lib, rknp.Network{})); !want.MatchString(s) {
		t.Fatalf("describe without the ABI field: %q", s)
	}
}

// rknp.udp_path: the fast path unless libslirp is asked for or the tap
// has no offloads.
func TestUDPPathInfo(t *testing.T) {
	for _, tc := range []struct {
		cfg  rknp.Config
		want string
	}{
		{rknp.Config{}, "fast"},
		{rknp.Config{UDPPath: rknp.UDPPathFast}, "fast"},
		{rknp.Config{UDPPath: rknp.UDPPathSlirp}, "slirp"},
		{rknp.Config{UDPPath: rknp.UDPPathFast, DisableOffload: true}, "slirp"},
		{rknp.Config{TCPPath: rknp.TCPPathSlirp}, "fast"},
	} {
		d, err := NewParentDriver(ParentOpt{PluginPath: pluginPath(t), Config: tc.cfg})
		if err != nil {
			t.Fatalf("%+v: %v", tc.cfg, err)
		}
		info, err := WithPluginInfo(fakePortDriver{}, d).Info(context.Background())
		d.(*parentDriver).close()
		if err != nil || info.Extra[ExtraUDPPath] != tc.want {
			t.Errorf("%+v: %s = %q, %v; want %q", tc.cfg, ExtraUDPPath, info.Extra[ExtraUDPPath], err, tc.want)
		}
	}
}

func TestSplitVersion(t *testing.T) {
	for _, c := range []struct{ in, plugin, libslirp string }{
		{"0.1.0 (libslirp 4.7.0)", "0.1.0", "4.7.0"},
		{"1.2.3-rc1 (libslirp 4.8.0-dirty)", "1.2.3-rc1", "4.8.0-dirty"},
		{"0.1.0", "0.1.0", ""},
		{"0.1.0 (libslirp )", "0.1.0 (libslirp )", ""},
		{"0.1.0 (libslirp 4.7.0", "0.1.0 (libslirp 4.7.0", ""},
	} {
		p, l := rknp.SplitVersion(c.in)
		if p != c.plugin || l != c.libslirp {
			t.Errorf("SplitVersion(%q) = %q, %q; want %q, %q", c.in, p, l, c.plugin, c.libslirp)
		}
	}
}
