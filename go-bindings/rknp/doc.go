// SPDX-License-Identifier: Apache-2.0

// Package rknp loads an rknp plugin library and wraps its C ABI
// (rknp.h): a user-mode network stack (libslirp) that runs in rootlesskit's
// parent process, and the child side that creates the tap device in the
// child's network namespace and hands it over.
//
// # Loading the library
//
// Two ways, chosen when the program is built:
//
//   - Default: Open(path) loads the library with dlopen at run time, so
//     the program has no link-time dependency on it. A path with a slash is
//     a file; a bare name such as "librknp.so.1" is searched by the dynamic
//     loader. The library's ABI major must be ABIMajor; features of later
//     minors are checked against the loaded library's minor.
//   - Build tag rknp_link: the library is linked (found with
//     `pkg-config rknp`), and Linked() or Open("") return it.
//
// The header these bindings are compiled against, rknp.h, is a copy of the
// repository's abi/rknp.h shipped inside the module, so the module builds
// wherever it is fetched to; only a C compiler is needed (cgo).
//
// # Using it
//
// In the parent: Library.NewParent with a Config, Parent.Start with a
// state directory and the child's PID, then carry Parent.Opaque to the
// child. In the child: Library.ChildConfigure with those pairs creates the
// tap and hands it to the parent. Package
// github.com/rknp/rknp/go-bindings/network/rknp wraps both halves as a
// rootlesskit network driver, and .../port/rknp its forwards as a port
// driver.
//
// Errors from the library are *Error values with a Code (see CodeOf),
// wrapped with context.
package rknp
