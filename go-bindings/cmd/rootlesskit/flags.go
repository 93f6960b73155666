// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"runtime"

	"github.com/urfave/cli/v2"
)

// DefaultPluginPath is the --net-plugin default. Installers set it with
//
//	go build -ldflags "-X main.DefaultPluginPath=/usr/local/lib/librknp.so.1"
//
// A bare file name is resolved by the dynamic loader; "" selects the
// linked library in builds with the rknp_link tag.
var DefaultPluginPath = "librknp.so.1"

// Flag categories, as in upstream's --help.
const (
	catState  = "State"
	catNet    = "Network"
	catPlugin = "Network [plugin]"
	catPasta  = "Network [pasta]"
	catSlirp  = "Network [slirp4netns]"
	catVPNKit = "Network [vpnkit]"
	catLXC    = "Network [lxc-user-nic]"
	catPort   = "Port"
	catMount  = "Mount"
	catProc   = "Process"
	catSubID  = "SubID"
	catMisc   = "Misc"
)

func str(name, cat, value, usage string) *cli.StringFlag {
	return &cli.StringFlag{Name: name, Category: cat, Value: value, Usage: usage}
}

func boolean(name, cat string, value bool, usage string) *cli.BoolFlag {
	return &cli.BoolFlag{Name: name, Category: cat, Value: value, Usage: usage}
}

// appFlags lists upstream rootlesskit's flags with their names, defaults
// and meanings, plus the plugin's.
func appFlags(debug *bool) []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "debug", Category: catMisc, Usage: "debug mode", Destination: debug},
		str("print-semver", catMisc, "", "print a version component as a decimal integer [major, minor, patch]"),
		str("state-dir", catState, "", "state directory"),

		str("net", catNet, "host", "network driver [host, none, plugin, slirp4netns, pasta(experimental), vpnkit, lxc-user-nic(experimental), gvisor-tap-vsock(experimental)]"),
		&cli.IntFlag{Name: "mtu", Category: catNet, Usage: "MTU for non-host network (default: 65520 for plugin, pasta and slirp4netns, 1500 for others)"},
		str("cidr", catNet, "", "CIDR for plugin, pasta, slirp4netns and gvisor-tap-vsock networks (default: 10.0.2.0/24)"),
		str("ifname", catNet, "", "Network interface name (default: tap0 for plugin, pasta, slirp4netns, and vpnkit; eth0 for lxc-user-nic)"),
		boolean("disable-host-loopback", catNet, false, "prohibit connecting to 127.0.0.1:* on the host namespace"),
		boolean("ipv6", catNet, false, "enable IPv6 routing. Unrelated to port forwarding. Only supported for plugin, pasta and slirp4netns. (experimental)"),
		boolean("detach-netns", catNet, false, "detach network namespaces "),

		&cli.StringFlag{Name: "net-plugin", Category: catPlugin, Value: DefaultPluginPath, EnvVars: []string{"ROOTLESSKIT_NET_PLUGIN"},
			Usage: "path of the rknp plugin library for --net=plugin"},
		str("plugin-mac-address", catPlugin, "", "MAC address of the interface for --net=plugin (default: chosen by the kernel)"),
		str("plugin-ipv6-address", catPlugin, "", "IPv6 address of the interface in fd00::/64 for --net=plugin --ipv6 (default: SLAAC)"),
		str("plugin-outbound-addr", catPlugin, "", "host IPv4 address to bind outbound connections to for --net=plugin"),
		str("plugin-outbound-addr6", catPlugin, "", "host IPv6 address to bind outbound connections to for --net=plugin"),
		boolean("plugin-disable-dns", catPlugin, false, "disable the built-in DNS forwarder for --net=plugin"),
		boolean("plugin-disable-offload", catPlugin, false, "plain tap frames (no TSO/checksum offload) for --net=plugin"),
		str("plugin-tcp", catPlugin, "", "guest TCP for --net=plugin: \"fast\" (each connection on its own host socket, scaled windows) or \"slirp\" (libslirp); default: the plugin's choice (the fast path since rknp 1.3)"),
		str("plugin-udp", catPlugin, "", "guest UDP for --net=plugin: \"fast\" (each flow to an outside destination on its own connected host socket, datagrams batched; needs the tap offloads) or \"slirp\" (libslirp); default: the plugin's choice (the fast path since rknp 1.5)"),
		str("plugin-tcp-peek", catPlugin, "auto", "how the --net=plugin TCP fast path reads host sockets, a test and diagnostic knob: \"offset\" (SO_PEEK_OFF, Linux >= 6.9; the start fails without it), \"discard\" (the older kernels' method, on any kernel) or \"auto\" (offset where the kernel has it, else discard) [auto, offset, discard]"),
		boolean("plugin-enable-dhcp", catPlugin, false, "answer the child's DHCP requests for --net=plugin (the child is configured statically without it)"),
		&cli.IntFlag{Name: "plugin-max-flows", Category: catPlugin, Usage: "most guest flows (TCP, UDP sources, pings) holding a host socket at once for --net=plugin; more are refused (default: 16384, lowered so a quarter of the fd limit stays free)"},
		&cli.IntFlag{Name: "plugin-max-new-flows-per-sec", Category: catPlugin, Usage: "new guest flows a second (bursts of as many) for --net=plugin; more are refused (default: 20000)"},
		boolean("plugin-disable-sandbox", catPlugin, false, "run the --net=plugin stack thread without its seccomp filter and Landlock ruleset (on by default where the kernel has them)"),

		str("pasta-binary", catPasta, "pasta", "path of pasta binary for --net=pasta"),
		str("pesto-binary", catPasta, "pesto", "path of pesto binary for --port-driver=pesto"),
		str("slirp4netns-binary", catSlirp, "slirp4netns", "path of slirp4netns binary for --net=slirp4netns"),
		str("slirp4netns-sandbox", catSlirp, "false", "enable slirp4netns sandbox (experimental) [auto, true, false]"),
		str("slirp4netns-seccomp", catSlirp, "false", "enable slirp4netns seccomp (experimental) [auto, true, false]"),
		str("vpnkit-binary", catVPNKit, "vpnkit", "path of VPNKit binary for --net=vpnkit"),
		str("lxc-user-nic-binary", catLXC, lxcUserNicBinary(), "path of lxc-user-nic binary for --net=lxc-user-nic"),
		str("lxc-user-nic-bridge", catLXC, "lxcbr0", "lxc-user-nic bridge name"),

		str("port-driver", catPort, "none", "port driver for non-host network. [none, implicit (for pasta), builtin, plugin (for --net=plugin), slirp4netns, gvisor-tap-vsock(experimental), pesto(experimental)]"),
		&cli.StringSliceFlag{Name: "publish", Aliases: []string{"p"}, Category: catPort, Usage: "publish ports. e.g. \"127.0.0.1:8080:80/tcp\""},
		boolean("source-ip-transparent", catPort, true, "preserve real client source IP using IP_TRANSPARENT (builtin port driver, TCP only)"),
		str("source-ip-transparent-backend", catPort, "auto", "firewall backend for --source-ip-transparent (builtin port driver) [auto, nft, iptables]"),

		&cli.StringSliceFlag{Name: "copy-up", Category: catMount, Usage: "mount a filesystem and copy-up the contents. e.g. \"--copy-up=/etc\" (typically required for non-host network)"},
		str("copy-up-mode", catMount, "tmpfs+symlink", "copy-up mode [tmpfs+symlink]"),
		str("propagation", catMount, "rprivate", "mount propagation [rprivate, rslave]"),

		boolean("pidns", catProc, false, "create a PID namespace"),
		boolean("cgroupns", catProc, false, "create a cgroup namespace"),
		boolean("utsns", catProc, false, "create a UTS namespace"),
		boolean("ipcns", catProc, false, "create an IPC namespace"),
		str("reaper", catProc, "auto", "enable process reaper. Requires --pidns. [auto,true,false]"),
		str("evacuate-cgroup2", catProc, "", "evacuate processes into the specified subgroup. Requires --pidns and --cgroupns"),

		str("subid-source", catSubID, "auto", "the source of the subids. \"dynamic\" executes /usr/bin/getsubids. \"static\" reads /etc/{subuid,subgid}. [auto,dynamic,static]"),
	}
}

// lxcUserNicBinary is where distributions install lxc-user-nic.
func lxcUserNicBinary() string {
	for _, p := range []string{
		"/usr/libexec/lxc/lxc-user-nic",
		"/usr/lib/" + gnuArch() + "-linux-gnu/lxc/lxc-user-nic",
		"/usr/lib/lxc/lxc-user-nic",
	} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// gnuArch maps GOARCH to the Debian multiarch triplet prefix.
func gnuArch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "386":
		return "i386"
	case "ppc64le":
		return "powerpc64le"
	}
	return runtime.GOARCH
}
