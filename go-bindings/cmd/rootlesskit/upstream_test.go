// SPDX-License-Identifier: Apache-2.0

package main

// Compares this command with upstream's cmd/rootlesskit at the version
// go.mod pins, read from the module cache: every upstream flag must exist
// here with the same kind, aliases, environment variables, category and
// literal default, and every --net and --port-driver value upstream accepts
// must be accepted here, by the parent and the child. Bumping rootlesskit
// in go.mod re-runs the comparison against the new release.

import (
	"encoding/json"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli/v2"
)

const upstreamModule = "github.com/rootless-containers/rootlesskit/v3"

// excludedUpstreamFlags are upstream flags this command deliberately does
// not offer, each with the reason. Empty: every flag is supported.
var excludedUpstreamFlags = map[string]string{}

// excludedUpstreamDrivers are upstream --net / --port-driver values this
// command deliberately refuses ("net=NAME" or "port-driver=NAME"), each
// with the reason. Empty: every driver is supported.
var excludedUpstreamDrivers = map[string]string{}

// upstreamFlag is a flag literal in upstream's source.
type upstreamFlag struct {
	kind     string // cli type name, e.g. "StringFlag"
	name     string
	aliases  []string
	envVars  []string
	category string // "" when the literal is not categorized
	value    string // Go literal of Value; "" when absent or not a literal
	hidden   bool
}

// upstreamSource parses the non-test Go files of upstream's
// cmd/rootlesskit in the module cache.
func upstreamSource(t *testing.T) (*token.FileSet, []*ast.File, string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-json", upstreamModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", upstreamModule, err)
	}
	var mod struct{ Version, Dir string }
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	if mod.Dir == "" {
		// Offline package builds (dh-golang sets GOPROXY=off) cannot fetch
		// the source; CI has the module proxy and never skips here.
		if proxy, _ := exec.Command("go", "env", "GOPROXY").Output(); strings.TrimSpace(string(proxy)) == "off" {
			t.Skipf("no source of %s@%s (vendored build or module not in the cache) and GOPROXY=off: cannot compare with upstream", upstreamModule, mod.Version)
		}
		out, err = exec.Command("go", "mod", "download", "-json", upstreamModule+"@"+mod.Version).Output()
		if err != nil {
			t.Fatalf("go mod download %s@%s: %v", upstreamModule, mod.Version, err)
		}
		if err := json.Unmarshal(out, &mod); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(mod.Dir, "cmd", "rootlesskit")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return fset, files, mod.Version
}

func stringLit(e ast.Expr) (string, bool) {
	if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
		s, err := strconv.Unquote(bl.Value)
		return s, err == nil
	}
	return "", false
}

func stringLits(e ast.Expr) []string {
	cl, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []string
	for _, el := range cl.Elts {
		if s, ok := stringLit(el); ok {
			out = append(out, s)
		}
	}
	return out
}

// literal renders a basic literal or true/false the way our values print
// with %v; anything else (a function call, a variable) is "".
func literal(e ast.Expr) string {
	switch v := e.(type) {
	case *ast.BasicLit:
		if v.Kind == token.STRING {
			s, _ := strconv.Unquote(v.Value)
			return s
		}
		return v.Value
	case *ast.Ident:
		if v.Name == "true" || v.Name == "false" {
			return v.Name
		}
	}
	return ""
}

// stringConsts maps the package's string constants (the categories) to
// their values.
func stringConsts(files []*ast.File) map[string]string {
	m := map[string]string{}
	for _, f := range files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, sp := range gd.Specs {
				vs := sp.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if s, ok := stringLit(vs.Values[i]); ok {
							m[n.Name] = s
						}
					}
				}
			}
		}
	}
	return m
}

// upstreamFlags collects every &cli.XxxFlag{...} literal, with the category
// when it is the first argument of a call whose second argument names a
// category constant (upstream's Categorize) or set as a Category field.
func upstreamFlags(files []*ast.File) []upstreamFlag {
	consts := stringConsts(files)
	categoryOf := map[*ast.CompositeLit]string{}
	var lits []*ast.CompositeLit
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if len(n.Args) == 2 {
					if u, ok := n.Args[0].(*ast.UnaryExpr); ok {
						if cl, ok := u.X.(*ast.CompositeLit); ok {
							if id, ok := n.Args[1].(*ast.Ident); ok {
								categoryOf[cl] = consts[id.Name]
							}
						}
					}
				}
			case *ast.CompositeLit:
				if sel, ok := n.Type.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "cli" && strings.HasSuffix(sel.Sel.Name, "Flag") {
						lits = append(lits, n)
					}
				}
			}
			return true
		})
	}
	var flags []upstreamFlag
	for _, cl := range lits {
		uf := upstreamFlag{kind: cl.Type.(*ast.SelectorExpr).Sel.Name, category: categoryOf[cl]}
		for _, el := range cl.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			switch kv.Key.(*ast.Ident).Name {
			case "Name":
				uf.name, _ = stringLit(kv.Value)
			case "Aliases":
				uf.aliases = stringLits(kv.Value)
			case "EnvVars":
				uf.envVars = stringLits(kv.Value)
			case "Value":
				uf.value = literal(kv.Value)
			case "Category":
				uf.category = literal(kv.Value)
				if id, ok := kv.Value.(*ast.Ident); ok {
					uf.category = consts[id.Name]
				}
			case "Hidden":
				uf.hidden = literal(kv.Value) == "true"
			}
		}
		if uf.name != "" {
			flags = append(flags, uf)
		}
	}
	return flags
}

// upstreamSwitchValues collects the string cases of every switch on
// X.String(flagName), written as `switch s := X.String(f); s` or
// `switch X.String(f)`: the values upstream accepts for that flag.
func upstreamSwitchValues(files []*ast.File, flagName string) []string {
	isFlagCall := func(e ast.Expr) bool {
		call, ok := e.(*ast.CallExpr)
		if !ok || len(call.Args) != 1 {
			return false
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "String" {
			return false
		}
		s, ok := stringLit(call.Args[0])
		return ok && s == flagName
	}
	var values []string
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			sw, ok := n.(*ast.SwitchStmt)
			if !ok {
				return true
			}
			on := sw.Tag != nil && isFlagCall(sw.Tag)
			if as, ok := sw.Init.(*ast.AssignStmt); ok && len(as.Rhs) == 1 && isFlagCall(as.Rhs[0]) {
				on = true
			}
			if !on {
				return true
			}
			for _, st := range sw.Body.List {
				for _, e := range st.(*ast.CaseClause).List {
					if s, ok := stringLit(e); ok && !slices.Contains(values, s) {
						values = append(values, s)
					}
				}
			}
			return true
		})
	}
	slices.Sort(values)
	return values
}

// valueOf is a flag's default as upstream's literal would print it.
func valueOf(f cli.Flag) string {
	switch f := f.(type) {
	case *cli.StringFlag:
		return f.Value
	case *cli.BoolFlag:
		return strconv.FormatBool(f.Value)
	case *cli.IntFlag:
		return strconv.Itoa(f.Value)
	}
	return ""
}

func TestFlagsMatchUpstream(t *testing.T) {
	_, files, version := upstreamSource(t)
	up := upstreamFlags(files)
	// A parser that finds nothing would pass vacuously.
	var names []string
	for _, uf := range up {
		names = append(names, uf.name)
	}
	for _, must := range []string{"net", "port-driver", "publish", "copy-up", "state-dir"} {
		if !slices.Contains(names, must) {
			t.Fatalf("upstream %s: found no --%s flag in cmd/rootlesskit; the source parser needs updating (found %v)", version, must, names)
		}
	}
	var debug bool
	ours := map[string]cli.Flag{}
	for _, f := range appFlags(&debug) {
		ours[f.Names()[0]] = f
	}
	for _, uf := range up {
		if uf.hidden {
			continue
		}
		if why, ok := excludedUpstreamFlags[uf.name]; ok {
			t.Logf("upstream %s --%s excluded: %s", version, uf.name, why)
			continue
		}
		f, ok := ours[uf.name]
		if !ok {
			t.Errorf("upstream %s has --%s (%s); this command lacks it (add it to flags.go or to excludedUpstreamFlags with a reason)", version, uf.name, uf.kind)
			continue
		}
		if kind := reflect.TypeOf(f).Elem().Name(); kind != uf.kind {
			t.Errorf("--%s: upstream %s is a %s, ours a %s", uf.name, version, uf.kind, kind)
		}
		if got := f.Names()[1:]; !slices.Equal(got, uf.aliases) {
			t.Errorf("--%s: upstream %s aliases %v, ours %v", uf.name, version, uf.aliases, got)
		}
		if df, ok := f.(cli.DocGenerationFlag); ok {
			for _, env := range uf.envVars {
				if !slices.Contains(df.GetEnvVars(), env) {
					t.Errorf("--%s: upstream %s reads $%s, ours does not", uf.name, version, env)
				}
			}
		}
		if cf, ok := f.(cli.CategorizableFlag); ok && uf.category != "" && cf.GetCategory() != uf.category {
			t.Errorf("--%s: upstream %s category %q, ours %q", uf.name, version, uf.category, cf.GetCategory())
		}
		if uf.value != "" && valueOf(f) != uf.value {
			t.Errorf("--%s: upstream %s default %q, ours %q", uf.name, version, uf.value, valueOf(f))
		}
	}
}

// quietLogrus drops the drivers' warnings for the rest of the test.
func quietLogrus(t *testing.T) {
	prev := logrus.StandardLogger().Out
	logrus.SetOutput(io.Discard)
	t.Cleanup(func() { logrus.SetOutput(prev) })
}

// runWith parses args with this command's flags and calls fn with the
// resulting context.
func runWith(t *testing.T, args []string, fn func(c *cli.Context)) {
	t.Helper()
	var debug bool
	set := flag.NewFlagSet("rootlesskit", flag.ContinueOnError)
	for _, f := range appFlags(&debug) {
		if err := f.Apply(set); err != nil {
			t.Fatal(err)
		}
	}
	if err := set.Parse(args); err != nil {
		t.Fatal(err)
	}
	fn(cli.NewContext(cli.NewApp(), set, nil))
}

// Neither half may answer an upstream driver with "unknown ...". Other
// errors are fine: a driver's binary is missing (the binaries are pointed
// at a path that does not exist, so nothing is started) or a combination
// is refused the way upstream refuses it.
func TestDriversMatchUpstream(t *testing.T) {
	_, files, version := upstreamSource(t)
	nets := upstreamSwitchValues(files, "net")
	ports := upstreamSwitchValues(files, "port-driver")
	for _, must := range []string{"host", "slirp4netns"} {
		if !slices.Contains(nets, must) {
			t.Fatalf("upstream %s: --net values %v lack %q; the source parser needs updating", version, nets, must)
		}
	}
	for _, must := range []string{"none", "builtin"} {
		if !slices.Contains(ports, must) {
			t.Fatalf("upstream %s: --port-driver values %v lack %q; the source parser needs updating", version, ports, must)
		}
	}
	t.Logf("upstream %s: --net %v, --port-driver %v", version, nets, ports)
	quietLogrus(t)
	missing := filepath.Join(t.TempDir(), "missing")
	binaries := []string{"--pasta-binary=" + missing, "--pesto-binary=" + missing, "--slirp4netns-binary=" + missing,
		"--vpnkit-binary=" + missing, "--lxc-user-nic-binary=" + missing}
	refused := func(err error, unknown string) bool { return err != nil && strings.HasPrefix(err.Error(), unknown) }

	for _, n := range nets {
		if why, ok := excludedUpstreamDrivers["net="+n]; ok {
			t.Logf("upstream --net=%s excluded: %s", n, why)
			continue
		}
		if _, err := newChildNetDriver(n, ""); refused(err, "unknown network mode") {
			t.Errorf("child: upstream %s accepts --net=%s, ours: %v", version, n, err)
		}
		runWith(t, append([]string{"--net=" + n}, binaries...), func(c *cli.Context) {
			nf, err := parseNetFlags(c)
			if err != nil {
				t.Fatalf("--net=%s: %v", n, err)
			}
			if _, err := newParentNetDriver(c, nf, t.TempDir()); refused(err, "unknown network mode") {
				t.Errorf("parent: upstream %s accepts --net=%s, ours: %v", version, n, err)
			}
		})
	}
	for _, p := range ports {
		if why, ok := excludedUpstreamDrivers["port-driver="+p]; ok {
			t.Logf("upstream --port-driver=%s excluded: %s", p, why)
			continue
		}
		if _, err := newChildPortDriver(p); refused(err, "unknown port driver") {
			t.Errorf("child: upstream %s accepts --port-driver=%s, ours: %v", version, p, err)
		}
		runWith(t, append([]string{"--port-driver=" + p}, binaries...), func(c *cli.Context) {
			nf, err := parseNetFlags(c)
			if err != nil {
				t.Fatalf("--port-driver=%s: %v", p, err)
			}
			if _, err := newParentPortDriver(c, nf, t.TempDir(), nil); refused(err, "unknown port driver") {
				t.Errorf("parent: upstream %s accepts --port-driver=%s, ours: %v", version, p, err)
			}
		})
	}
}
