// SPDX-License-Identifier: Apache-2.0

//go:build rknp_link

package rknp

import "testing"

func TestLinked(t *testing.T) {
	l, err := Linked()
	if err != nil {
		t.Fatal(err)
	}
	if l2, err := Open(""); err != nil || l2 != l {
		t.Fatalf("Open(\"\") = %v, %v; want the linked library", l2, err)
	}
	if major, _ := l.ABIVersion(); major != ABIMajor {
		t.Fatalf("abi major %d", major)
	}
	p, err := l.NewParent(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
