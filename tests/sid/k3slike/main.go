// SPDX-License-Identifier: Apache-2.0

// k3slike embeds rootlesskit v2's parent, child and slirp4netns network
// driver as k3s does in its rootless mode (k3s pkg/rootless): `slirp4netns`
// looked up in PATH, 10.41.0.0/16, the host's loopback disabled, new PID,
// cgroup, UTS and IPC namespaces, /etc /run /var/lib copied up, the port
// driver from K3S_ROOTLESS_PORT_DRIVER (builtin, the default, or
// slirp4netns), and the program itself run again inside as the workload.
// Used by tests/sid/engines_cases.sh.
//
//	k3slike CMD [ARG...]          CMD runs inside (its exit status is ours)
//	k3slike expose HOSTPORT PORT  (inside) publishes 127.0.0.1:HOSTPORT on
//	                              the host to PORT inside, as k3s does for
//	                              a service, through rootlesskit's API
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/rootless-containers/rootlesskit/v2/pkg/api/client"
	"github.com/rootless-containers/rootlesskit/v2/pkg/child"
	"github.com/rootless-containers/rootlesskit/v2/pkg/copyup/tmpfssymlink"
	"github.com/rootless-containers/rootlesskit/v2/pkg/network/slirp4netns"
	"github.com/rootless-containers/rootlesskit/v2/pkg/parent"
	"github.com/rootless-containers/rootlesskit/v2/pkg/port"
	portbuiltin "github.com/rootless-containers/rootlesskit/v2/pkg/port/builtin"
	portslirp4netns "github.com/rootless-containers/rootlesskit/v2/pkg/port/slirp4netns"
	"github.com/sirupsen/logrus"
)

const (
	pipeFDEnv     = "_K3SLIKE_ROOTLESS_FD"
	childEnv      = "_K3SLIKE_ROOTLESS_SOCK" // the API socket, in the workload
	activationEnv = "_K3SLIKE_ACTIVATION"
	helperEnv     = "_K3SLIKE_ACTIVATION_HELPER"
	stateDirEnv   = "_K3SLIKE_STATE_DIR"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: k3slike CMD [ARG...] | k3slike expose HOSTPORT PORT")
		os.Exit(2)
	}
	if os.Getenv("K3SLIKE_DEBUG") != "" {
		logrus.SetLevel(logrus.DebugLevel)
	}
	var err error
	switch {
	case os.Args[1] == "expose":
		err = expose(os.Args[2:])
	case os.Getenv(pipeFDEnv) != "":
		err = child.Child(childOpt())
	case os.Getenv(childEnv) != "":
		err = workload(os.Args[1:])
	default:
		err = runParent()
	}
	if err != nil {
		logrus.Fatal(err)
	}
}

func portDriverName() string {
	if strings.ToLower(os.Getenv("K3S_ROOTLESS_PORT_DRIVER")) == "slirp4netns" {
		return "slirp4netns"
	}
	return "builtin"
}

type debugWriter struct{}

func (debugWriter) Write(p []byte) (int, error) {
	logrus.Debug(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func runParent() error {
	base := os.Getenv("XDG_RUNTIME_DIR")
	if base == "" {
		base = os.TempDir()
	}
	stateDir := filepath.Join(base, "k3slike", "rootless")
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	binary := "slirp4netns"
	if _, err := exec.LookPath(binary); err != nil {
		return err
	}
	_, ipnet, _ := net.ParseCIDR("10.41.0.0/16")
	var log io.Writer = debugWriter{}
	apiSocket := ""
	if portDriverName() == "slirp4netns" {
		apiSocket = filepath.Join(stateDir, ".s4nn.sock")
	}
	nd, err := slirp4netns.NewParentDriver(log, binary, 0, ipnet, "tap0", true, apiSocket, false, false, false)
	if err != nil {
		return err
	}
	var pd port.ParentDriver
	if apiSocket != "" {
		pd, err = portslirp4netns.NewParentDriver(log, apiSocket)
	} else {
		pd, err = portbuiltin.NewParentDriver(log, stateDir)
	}
	if err != nil {
		return err
	}
	os.Setenv(childEnv, filepath.Join(stateDir, parent.StateFileAPISock))
	opt := parent.Opt{
		PipeFDEnvKey:             pipeFDEnv,
		ChildUseActivationEnvKey: activationEnv,
		StateDir:                 stateDir,
		StateDirEnvKey:           stateDirEnv,
		NetworkDriver:            nd,
		PortDriver:               pd,
		CreatePIDNS:              true,
		CreateCgroupNS:           true,
		CreateUTSNS:              true,
		CreateIPCNS:              true,
	}
	if err := parent.Parent(opt); err != nil {
		// The workload's exit status is passed on, as rootlesskit does.
		if ee, ok := err.(*exec.ExitError); ok {
			os.Exit(ee.ExitCode())
		}
		return err
	}
	return nil
}

func childOpt() child.Opt {
	var pd port.ChildDriver = portbuiltin.NewChildDriver(debugWriter{})
	if portDriverName() == "slirp4netns" {
		pd = portslirp4netns.NewChildDriver()
	}
	return child.Opt{
		PipeFDEnvKey:              pipeFDEnv,
		RunActivationHelperEnvKey: helperEnv,
		ChildUseActivationEnvKey:  activationEnv,
		StateDirEnvKey:            stateDirEnv,
		TargetCmd:                 os.Args,
		NetworkDriver:             slirp4netns.NewChildDriver(),
		PortDriver:                pd,
		CopyUpDriver:              tmpfssymlink.NewChildDriver(),
		CopyUpDirs:                []string{"/etc", "/var/run", "/run", "/var/lib"},
		MountProcfs:               true,
		Reaper:                    true,
	}
}

// workload: the program again, inside; it runs CMD (k3s runs its server).
func workload(args []string) error {
	path, err := exec.LookPath(args[0])
	if err != nil {
		return err
	}
	return syscall.Exec(path, args, os.Environ())
}

func expose(args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("usage: k3slike expose HOSTPORT PORT")
	}
	hostPort, err1 := strconv.Atoi(args[0])
	childPort, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil {
		return fmt.Errorf("bad port in %v", args)
	}
	c, err := client.New(os.Getenv(childEnv))
	if err != nil {
		return err
	}
	st, err := c.PortManager().AddPort(context.Background(), port.Spec{
		Proto: "tcp", ParentIP: "127.0.0.1", ParentPort: hostPort, ChildPort: childPort,
	})
	if err != nil {
		return err
	}
	fmt.Printf("exposed %d: 127.0.0.1:%d -> %d/tcp\n", st.ID, hostPort, childPort)
	return nil
}
