// SPDX-License-Identifier: Apache-2.0

package rknp

/*
// rknp.h is the module's own copy of abi/rknp.h (header_test.go keeps
// them identical): an include path outside the module root would not exist
// for programs that get the module from a proxy.
#cgo CFLAGS: -I${SRCDIR}
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include "trampolines.h"

static const char *rknp_go_dlerror(void) {
	const char *e = dlerror();
	return e ? e : "unknown dlopen error";
}

// Returns the table, or NULL with *why set: 1 no symbol, 2 wrong major.
static const void *rknp_go_dlopen_api(const char *path, uint32_t major, void **handle, int *why, const char **msg) {
	*why = 0;
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		*why = 3;
		*msg = rknp_go_dlerror();
		return NULL;
	}
	dlerror();
	rknp_get_api_fn get = (rknp_get_api_fn)dlsym(h, RKNP_GET_API_SYMBOL);
	if (get == NULL) {
		*why = 1;
		dlclose(h);
		return NULL;
	}
	const void *api = get(major);
	if (api == NULL) {
		*why = 2;
		dlclose(h);
		return NULL;
	}
	*handle = h;
	return api;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"
)

// Loader errors; test with errors.Is.
var (
	ErrNotPlugin     = errors.New("not an rknp plugin (no " + C.RKNP_GET_API_SYMBOL + " symbol)")
	ErrABIMajor      = errors.New("plugin does not implement the requested ABI major")
	ErrTableTooSmall = errors.New("plugin function table is smaller than ABI 1.0")
)

// ABIMajor is the ABI major these bindings speak.
const ABIMajor = C.RKNP_ABI_MAJOR

// ABIMinor is the minor of the header these bindings were built with;
// features of later minors are checked against the loaded library's.
const ABIMinor = C.RKNP_ABI_MINOR

// Library is a loaded plugin. It is never unloaded: stack threads and log
// callbacks may outlive any single user, and dlclose would race them.
type Library struct {
	path string // "" for the linked library
	api  *C.rknp_api_v1
}

var (
	cacheMu sync.Mutex
	cache   = map[string]*Library{}
)

// Open loads the plugin at path (dlopen) and checks its ABI. Opening the
// same path twice returns the same Library. Open("") returns the linked
// library in builds with the rknp_link tag and an error otherwise.
func Open(path string) (*Library, error) {
	if path == "" {
		return Linked()
	}
	return openMajor(path, ABIMajor)
}

// openMajor is Open with an explicit ABI major, so tests can ask for one the
// plugin does not speak.
func openMajor(path string, major uint32) (*Library, error) {
	cacheMu.Lock()
	defer cacheMu.Unlock()
	key := fmt.Sprintf("%d:%s", major, path)
	if l, ok := cache[key]; ok {
		return l, nil
	}
	// dlopen searches the library path for names without a slash; only
	// real paths can be stat'ed for a clear "no such file" error.
	if strings.Contains(path, "/") {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("rknp: open plugin: %w", err)
		}
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var handle unsafe.Pointer
	var why C.int
	var msg *C.char
	api := C.rknp_go_dlopen_api(cpath, C.uint32_t(major), &handle, &why, &msg)
	switch why {
	case 1:
		return nil, fmt.Errorf("rknp: open plugin %s: %w", path, ErrNotPlugin)
	case 2:
		return nil, fmt.Errorf("rknp: open plugin %s: major %d: %w", path, major, ErrABIMajor)
	case 3:
		return nil, fmt.Errorf("rknp: open plugin %s: %s", path, C.GoString(msg))
	}
	l, err := newLibrary(path, api)
	if err != nil {
		return nil, err
	}
	cache[key] = l
	return l, nil
}

// newLibrary validates a function table; shared by the dlopen and linked
// paths.
func newLibrary(path string, api unsafe.Pointer) (*Library, error) {
	t := C.rknp_go_table(api)
	name := path
	if name == "" {
		name = "(linked)"
	}
	// Only the 1.0 functions are required; later ones are optional and
	// checked before use, so older libraries keep working.
	if min := C.rknp_go_v1_0_size(); C.size_t(t.struct_size) < min {
		return nil, fmt.Errorf("rknp: open plugin %s: struct_size %d < %d: %w",
			name, t.struct_size, min, ErrTableTooSmall)
	}
	if t.abi_major != C.RKNP_ABI_MAJOR {
		return nil, fmt.Errorf("rknp: open plugin %s: table reports major %d: %w", name, t.abi_major, ErrABIMajor)
	}
	return &Library{path: path, api: t}, nil
}

// Path is the file the library was loaded from ("" when linked).
func (l *Library) Path() string { return l.path }

// ABIVersion is the library's packed ABI version: major<<16 | minor.
func (l *Library) ABIVersion() (major, minor uint32) {
	v := uint32(C.rknp_go_abi_version(l.api))
	return v >> 16, v & 0xffff
}

// Version is the library's version string, e.g. "1.4.0 (libslirp 4.7.0)".
func (l *Library) Version() string {
	return C.GoString(C.rknp_go_library_version(l.api))
}

// Versions splits Version into the plugin's own version and the libslirp
// version it runs on, e.g. ("1.4.0", "4.7.0"). A plugin whose version
// string does not end in "(libslirp X)" reports it whole and libslirp "".
func (l *Library) Versions() (plugin, libslirp string) {
	return SplitVersion(l.Version())
}

// SplitVersion is Versions for a version string.
func SplitVersion(v string) (plugin, libslirp string) {
	const marker = " (libslirp "
	i := strings.LastIndex(v, marker)
	if i < 0 || !strings.HasSuffix(v, ")") || i+len(marker) >= len(v)-1 {
		return v, ""
	}
	return v[:i], v[i+len(marker) : len(v)-1]
}
