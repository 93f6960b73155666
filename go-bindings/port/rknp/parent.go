// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/rootless-containers/rootlesskit/v3/pkg/api"
	"github.com/rootless-containers/rootlesskit/v3/pkg/network"
	"github.com/rootless-containers/rootlesskit/v3/pkg/port"
	"github.com/rootless-containers/rootlesskit/v3/pkg/port/portutil"

	netrknp "github.com/rknp/rknp/go-bindings/network/rknp" // this package and the loader are rknp too
	"github.com/rknp/rknp/go-bindings/rknp"
)

// DriverName is the --port-driver value and the name Info reports.
const DriverName = "plugin"

// ExtraSourceIPPropagated is the PortDriverInfo.Extra key telling whether
// the child sees the real client address ("false" for this driver).
const ExtraSourceIPPropagated = "sourceIPPropagated"

// ErrStopped is returned by AddPort once the driver has been shut down.
var ErrStopped = errors.New("plugin port driver is stopped")

// forwarder is the forwarding half of a running *rknp.Parent (what
// network/rknp.ForwardingParent returns; tests fake it). Its methods must
// be thread-safe.
type forwarder interface {
	AddForward(f rknp.Forward) (uint32, error)
	RemoveForward(id uint32) error
}

// published is one rootlesskit port: the spec and the library forwards
// it expanded to (fwd.ID set).
type published struct {
	status port.Status
	fwds   []hostForward
}

type driver struct {
	logWriter io.Writer
	fwd       forwarder

	mu      sync.Mutex // guards the fields below and orders library calls
	ports   map[int]*published
	nextID  int
	stopped bool
}

var (
	_ port.ParentDriver = (*driver)(nil)
	_ io.Closer         = (*driver)(nil)
)

// NewParentDriver returns the parent half of --port-driver=plugin, which
// forwards through the stack of netDriver, a parent driver from
// network/rknp.NewParentDriver (any other driver, or a library without
// port forwarding, is an error: that of netrknp.ForwardingParent). The
// driver also implements io.Closer (idempotent): Close removes every
// forward, as RunParentDriver does when it is told to quit.
func NewParentDriver(logWriter io.Writer, netDriver network.ParentDriver) (port.ParentDriver, error) {
	fwd, err := netrknp.ForwardingParent(netDriver)
	if err != nil {
		return nil, err
	}
	return newDriver(logWriter, fwd), nil
}

// newDriver is the driver on fwd, an rknp parent or a test's fake.
func newDriver(logWriter io.Writer, fwd forwarder) *driver {
	if logWriter == nil {
		logWriter = io.Discard
	}
	return &driver{logWriter: logWriter, fwd: fwd, ports: make(map[int]*published), nextID: 1}
}

func (d *driver) Info(ctx context.Context) (*api.PortDriverInfo, error) {
	return &api.PortDriverInfo{
		Driver: DriverName,
		Protos: []string{"tcp", "tcp4", "tcp6", "udp", "udp4", "udp6"},
		// libslirp delivers to the guest's tap address, never to its lo.
		DisallowLoopbackChildIP: true,
		Extra:                   map[string]string{ExtraSourceIPPropagated: "false"},
	}, nil
}

// OpaqueForChild: the child has nothing to set up.
func (d *driver) OpaqueForChild() map[string]string { return nil }

// RunParentDriver is ready at once (the network driver has started the
// stack before rootlesskit starts port drivers) and removes the forwards
// when quit is signalled.
func (d *driver) RunParentDriver(initComplete chan struct{}, quit <-chan struct{}, _ *port.ChildContext) error {
	select {
	case initComplete <- struct{}{}:
		<-quit
	case <-quit:
	}
	// A failed teardown must not turn the child's exit status into an
	// error: the stack and its sockets go away with the network driver.
	if err := d.Close(); err != nil {
		fmt.Fprintf(d.logWriter, "shutting down: %v\n", err)
	}
	return nil
}

func (d *driver) AddPort(ctx context.Context, spec port.Spec) (*port.Status, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return nil, ErrStopped
	}
	existing := make(map[int]*port.Status, len(d.ports))
	for id, p := range d.ports {
		existing[id] = &p.status
	}
	if err := portutil.ValidatePortSpec(spec, existing); err != nil {
		return nil, err
	}
	fwds, err := forwardsFor(spec)
	if err != nil {
		return nil, err
	}
	if err := d.checkConflict(fwds); err != nil {
		return nil, err
	}
	added := make([]hostForward, 0, len(fwds))
	for _, h := range fwds {
		id, err := d.fwd.AddForward(h.fwd)
		if err != nil {
			if h.optional && noIPv6(err) {
				fmt.Fprintf(d.logWriter, "%s: skipped, the host has no IPv6: %v\n", h.key(), err)
				continue
			}
			d.removeAll(added)
			return nil, fmt.Errorf("forwarding %s to child port %d: %w", h.key(), spec.ChildPort, annotatePermission(err, spec.ParentPort))
		}
		h.fwd.ID = id
		added = append(added, h)
	}
	st := port.Status{ID: d.nextID, Spec: spec}
	d.ports[st.ID] = &published{status: st, fwds: added}
	d.nextID++
	for _, h := range added {
		fmt.Fprintf(d.logWriter, "port %d: %s -> child port %d (forward %d)\n", st.ID, h.key(), spec.ChildPort, h.fwd.ID)
	}
	return &st, nil
}

// checkConflict names the port already holding one of fwds' host sides
// (e.g. "tcp" and "tcp4" on the same port), in rootlesskit's IDs rather
// than the library's.
func (d *driver) checkConflict(fwds []hostForward) error {
	for id, p := range d.ports {
		for _, old := range p.fwds {
			for _, h := range fwds {
				if old.key() == h.key() {
					return fmt.Errorf("conflict with ID %d: %s is already published", id, h.key())
				}
			}
		}
	}
	return nil
}

func (d *driver) ListPorts(ctx context.Context) ([]port.Status, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]port.Status, 0, len(d.ports))
	for _, p := range d.ports {
		out = append(out, p.status)
	}
	slices.SortFunc(out, func(a, b port.Status) int { return a.ID - b.ID })
	return out, nil
}

func (d *driver) RemovePort(ctx context.Context, id int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.ports[id]
	if !ok {
		return fmt.Errorf("unknown id: %d", id)
	}
	delete(d.ports, id)
	if err := d.removeAll(p.fwds); err != nil {
		return fmt.Errorf("removing port %d: %w", id, err)
	}
	return nil
}

// Close removes every forward and makes AddPort fail with ErrStopped.
// It is idempotent; forwards of an already closed rknp parent are gone
// with it and not reported.
func (d *driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return nil
	}
	d.stopped = true
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(d.ports)) {
		if err := d.removeAll(d.ports[id].fwds); err != nil && !errors.Is(err, rknp.ErrClosed) {
			errs = append(errs, fmt.Errorf("removing port %d: %w", id, err))
		}
		delete(d.ports, id)
	}
	return errors.Join(errs...)
}

// removeAll removes the library forwards of fwds, all of them even if
// some fail. Called with d.mu held.
func (d *driver) removeAll(fwds []hostForward) error {
	var errs []error
	for _, h := range fwds {
		if err := d.fwd.RemoveForward(h.fwd.ID); err != nil {
			errs = append(errs, fmt.Errorf("%s (forward %d): %w", h.key(), h.fwd.ID, err))
		}
	}
	return errors.Join(errs...)
}

// noIPv6 reports whether err is the library failing to bind "::" because
// the host has no IPv6 (the ABI carries the strerror text, not errno).
func noIPv6(err error) bool {
	var e *rknp.Error
	if !errors.As(err, &e) || e.Code != rknp.CodeSystem {
		return false
	}
	return strings.Contains(e.Message, "Address family not supported") ||
		strings.Contains(e.Message, "Cannot assign requested address")
}

// annotatePermission explains a refused bind of a privileged port.
func annotatePermission(err error, parentPort int) error {
	if rknp.CodeOf(err) != rknp.CodePermission {
		return err
	}
	b, rerr := os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
	if rerr != nil {
		return err
	}
	start, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if perr != nil || parentPort >= start {
		return err
	}
	return fmt.Errorf("port %d is privileged (net.ipv4.ip_unprivileged_port_start=%d): "+
		"lower that sysctl, give rootlesskit CAP_NET_BIND_SERVICE, or use a port >= %d: %w",
		parentPort, start, start, err)
}
