// SPDX-License-Identifier: Apache-2.0

package rknp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rootless-containers/rootlesskit/v3/pkg/port"

	"github.com/rknp/rknp/go-bindings/rknp"
)

// fakeForwarder mimics the library: duplicate host sides are invalid
// arguments, and fail (keyed by "tcp 0.0.0.0:80") injects errors.
type fakeForwarder struct {
	mu     sync.Mutex
	next   uint32
	active map[uint32]rknp.Forward
	fail   map[string]error
	closed bool
}

func newFake() *fakeForwarder {
	return &fakeForwarder{active: map[uint32]rknp.Forward{}, fail: map[string]error{}}
}

func (f *fakeForwarder) AddForward(fw rknp.Forward) (uint32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, fmt.Errorf("rknp: add forward: %w", rknp.ErrClosed)
	}
	k := hostForward{fwd: fw}.key()
	if err := f.fail[k]; err != nil {
		return 0, fmt.Errorf("rknp: add forward: %w", err)
	}
	for id, a := range f.active {
		if (hostForward{fwd: a}).key() == k {
			return 0, &rknp.Error{Code: rknp.CodeInvalidArgument, Message: fmt.Sprintf("%s is already forwarded (id %d)", k, id)}
		}
	}
	f.next++
	f.active[f.next] = fw
	return f.next, nil
}

func (f *fakeForwarder) RemoveForward(id uint32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fmt.Errorf("rknp: remove forward: %w", rknp.ErrClosed)
	}
	if _, ok := f.active[id]; !ok {
		return &rknp.Error{Code: rknp.CodeInvalidArgument, Message: fmt.Sprintf("no forward with id %d", id)}
	}
	delete(f.active, id)
	return nil
}

func (f *fakeForwarder) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, a := range f.active {
		out = append(out, hostForward{fwd: a}.key())
	}
	return out
}

func newTestDriver(t *testing.T, f forwarder) *driver {
	t.Helper()
	return newDriver(nil, f)
}

func TestNewParentDriverNotRknp(t *testing.T) {
	if _, err := NewParentDriver(nil, nil); err == nil || !strings.Contains(err.Error(), "not the plugin network driver") {
		t.Fatalf("want an error for a network driver that is not rknp's, got %v", err)
	}
}

func TestInfo(t *testing.T) {
	d := newTestDriver(t, newFake())
	info, err := d.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Driver != "plugin" || strings.Join(info.Protos, ",") != "tcp,tcp4,tcp6,udp,udp4,udp6" ||
		!info.DisallowLoopbackChildIP || info.Extra[ExtraSourceIPPropagated] != "false" {
		t.Fatalf("info %+v", info)
	}
	if d.OpaqueForChild() != nil {
		t.Fatal("opaque for the child")
	}
}

func TestAddListRemove(t *testing.T) {
	f := newFake()
	d := newTestDriver(t, f)
	ctx := context.Background()
	st, err := d.AddPort(ctx, port.Spec{Proto: "tcp", ParentPort: 8080, ChildPort: 80})
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != 1 || st.Spec.Proto != "tcp" || st.Spec.ParentIP != "" {
		t.Fatalf("status %+v", st)
	}
	st2, err := d.AddPort(ctx, port.Spec{Proto: "udp4", ParentIP: "127.0.0.1", ParentPort: 5353, ChildPort: 53})
	if err != nil {
		t.Fatal(err)
	}
	if st2.ID != 2 {
		t.Fatalf("second id %d", st2.ID)
	}
	if got := strings.Join(f.keys(), ","); len(f.keys()) != 3 ||
		!strings.Contains(got, "tcp 0.0.0.0:8080") || !strings.Contains(got, "tcp [::]:8080") || !strings.Contains(got, "udp 127.0.0.1:5353") {
		t.Fatalf("library forwards %v", got)
	}
	ls, err := d.ListPorts(ctx)
	if err != nil || len(ls) != 2 || ls[0].ID != 1 || ls[1].ID != 2 || ls[1].Spec.ChildPort != 53 {
		t.Fatalf("list %+v, %v", ls, err)
	}
	if err := d.RemovePort(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := f.keys(); len(got) != 1 || got[0] != "udp 127.0.0.1:5353" {
		t.Fatalf("after remove: %v", got)
	}
	if err := d.RemovePort(ctx, 1); err == nil || !strings.Contains(err.Error(), "unknown id: 1") {
		t.Fatalf("removing twice: %v", err)
	}
	// IDs are not reused.
	st3, err := d.AddPort(ctx, port.Spec{Proto: "tcp", ParentPort: 8080, ChildPort: 80})
	if err != nil || st3.ID != 3 {
		t.Fatalf("re-add: %+v, %v", st3, err)
	}
}

func TestAddPortConflicts(t *testing.T) {
	f := newFake()
	d := newTestDriver(t, f)
	ctx := context.Background()
	if _, err := d.AddPort(ctx, port.Spec{Proto: "tcp", ParentPort: 8080, ChildPort: 80}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec port.Spec
		want string
	}{
		// the same spec: portutil's check
		{port.Spec{Proto: "tcp", ParentPort: 8080, ChildPort: 81}, "conflict with ID 1"},
		// an overlapping one: only the host sides tell
		{port.Spec{Proto: "tcp4", ParentPort: 8080, ChildPort: 81}, "conflict with ID 1: tcp 0.0.0.0:8080 is already published"},
		{port.Spec{Proto: "tcp", ParentIP: "::", ParentPort: 8080, ChildPort: 81}, "conflict with ID 1: tcp [::]:8080 is already published"},
		// invalid specs
		{port.Spec{Proto: "tcp", ParentPort: 0, ChildPort: 80}, "invalid ParentPort"},
		{port.Spec{Proto: "tcp", ParentPort: 1, ChildPort: 70000}, "invalid ChildPort"},
		{port.Spec{Proto: "icmp", ParentPort: 1, ChildPort: 1}, "unknown proto"},
		{port.Spec{Proto: "tcp", ParentPort: 8081, ChildIP: "127.0.0.1", ChildPort: 80}, "loopback ChildIP"},
	} {
		if _, err := d.AddPort(ctx, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: want %q, got %v", tc.spec, tc.want, err)
		}
	}
	// udp on the same port is another host side.
	if _, err := d.AddPort(ctx, port.Spec{Proto: "udp", ParentPort: 8080, ChildPort: 80}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.keys()); n != 4 {
		t.Fatalf("%d library forwards, want 4", n)
	}
}

func TestAddPortLibraryErrors(t *testing.T) {
	f := newFake()
	inUse := &rknp.Error{Code: rknp.CodeSystem, Message: "forward tcp ::%:9090: Address already in use"}
	f.fail["tcp [::]:9090"] = inUse
	d := newTestDriver(t, f)
	ctx := context.Background()
	// The IPv6 half fails for another reason than a missing IPv6: the
	// IPv4 half is rolled back and the error names the host side.
	_, err := d.AddPort(ctx, port.Spec{Proto: "tcp", ParentPort: 9090, ChildPort: 80})
	if !errors.Is(err, inUse) || !strings.Contains(err.Error(), "forwarding tcp [::]:9090 to child port 80") ||
		!strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("want the wrapped in-use error, got %v", err)
	}
	if got := f.keys(); len(got) != 0 {
		t.Fatalf("not rolled back: %v", got)
	}
	if ls, _ := d.ListPorts(ctx); len(ls) != 0 {
		t.Fatalf("failed port listed: %+v", ls)
	}
	// A host without IPv6: the optional half is skipped.
	f.fail["tcp [::]:9091"] = &rknp.Error{Code: rknp.CodeSystem, Message: "forward tcp :::9091: Address family not supported by protocol"}
	st, err := d.AddPort(ctx, port.Spec{Proto: "tcp", ParentPort: 9091, ChildPort: 80})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.keys(); len(got) != 1 || got[0] != "tcp 0.0.0.0:9091" {
		t.Fatalf("forwards %v", got)
	}
	// ...but not when it was asked for explicitly.
	f.fail["tcp [::]:9092"] = f.fail["tcp [::]:9091"]
	if _, err := d.AddPort(ctx, port.Spec{Proto: "tcp6", ParentPort: 9092, ChildPort: 80}); rknp.CodeOf(err) != rknp.CodeSystem {
		t.Fatalf("tcp6 without IPv6: %v", err)
	}
	if err := d.RemovePort(ctx, st.ID); err != nil {
		t.Fatal(err)
	}
	// A privileged port gets a hint.
	f.fail["tcp 0.0.0.0:1"] = &rknp.Error{Code: rknp.CodePermission, Message: "forward tcp 0.0.0.0:1: Permission denied"}
	if _, err := d.AddPort(ctx, port.Spec{Proto: "tcp4", ParentPort: 1, ChildPort: 80}); rknp.CodeOf(err) != rknp.CodePermission {
		t.Fatalf("privileged: %v", err)
	} else {
		t.Logf("privileged port: %v", err)
	}
}

func TestAddPortCanceled(t *testing.T) {
	d := newTestDriver(t, newFake())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.AddPort(ctx, port.Spec{Proto: "tcp", ParentPort: 1, ChildPort: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v", err)
	}
}

func TestRunParentDriverAndClose(t *testing.T) {
	f := newFake()
	d := newTestDriver(t, f)
	init, quit, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() { done <- d.RunParentDriver(init, quit, nil) }()
	select {
	case <-init:
	case <-time.After(5 * time.Second):
		t.Fatal("no initComplete")
	}
	ctx := context.Background()
	for _, p := range []int{7001, 7002} {
		if _, err := d.AddPort(ctx, port.Spec{Proto: "tcp", ParentPort: p, ChildPort: 80}); err != nil {
			t.Fatal(err)
		}
	}
	quit <- struct{}{} // rootlesskit sends, it does not close
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := f.keys(); len(got) != 0 {
		t.Fatalf("forwards left after quit: %v", got)
	}
	if _, err := d.AddPort(ctx, port.Spec{Proto: "tcp", ParentPort: 7003, ChildPort: 80}); !errors.Is(err, ErrStopped) {
		t.Fatalf("after quit: want ErrStopped, got %v", err)
	}
	if err := d.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
}

func TestRunParentDriverQuitBeforeInit(t *testing.T) {
	d := newTestDriver(t, newFake())
	quit := make(chan struct{})
	close(quit)
	if err := d.RunParentDriver(make(chan struct{}), quit, nil); err != nil {
		t.Fatal(err)
	}
}

func TestCloseAfterParentClosed(t *testing.T) {
	f := newFake()
	d := newTestDriver(t, f)
	if _, err := d.AddPort(context.Background(), port.Spec{Proto: "tcp4", ParentPort: 7010, ChildPort: 80}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	if err := d.Close(); err != nil {
		t.Fatalf("forwards of a closed parent are gone with it: %v", err)
	}
}

func TestChildDriver(t *testing.T) {
	quit, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- NewChildDriver().RunChildDriver(nil, quit, "") }()
	select {
	case err := <-done:
		t.Fatalf("returned before quit: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	quit <- struct{}{}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
