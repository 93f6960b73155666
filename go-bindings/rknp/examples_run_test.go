package rknp_test

// Runs the examples against the built library and checks what they print,
// as an `// Output:` comment would, but skipping (like the other tests)
// when no library is built.

import (
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/rknp/rknp/go-bindings/internal/testplugin"
	"github.com/rknp/rknp/go-bindings/rknp"
)

// captureStdout returns what fn prints to os.Stdout.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	defer func() {
		os.Stdout = saved
		w.Close()
		r.Close()
	}()
	fn()
	os.Stdout = saved
	w.Close()
	return string(<-done)
}

func TestExamples(t *testing.T) {
	t.Setenv("RKNP_PLUGIN", testplugin.Path(t))
	for _, ex := range []struct {
		name string
		fn   func()
		want string
	}{
		{"ExampleOpen", ExampleOpen, fmt.Sprintf("ABI major: %d\nhas what these bindings need: true\n", rknp.ABIMajor)},
		{"ExampleLibrary_NewParent", ExampleLibrary_NewParent,
			"child: tap0 10.0.2.100/24 gateway 10.0.2.2 dns [10.0.2.3] mtu 1500\n" +
				"hand-over pairs for the child: true\n" +
				"tap attached: false\n"},
	} {
		if got := captureStdout(t, ex.fn); got != ex.want {
			// Stop: a later example would log.Fatal on the same cause.
			t.Fatalf("%s printed:\n%s\nwant:\n%s", ex.name, got, ex.want)
		}
	}
}
