package docs

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the module's directory, from this package's.
const root = "../.."

// A pkg is one package of the module as its source declares it (test
// files left out).
type pkg struct {
	path    string              // relative to the module: "snap", "relay/embedded"
	name    string              // of its package clause
	decls   map[string]bool     // top-level names
	members map[string][]string // type name → its methods, fields and interface methods
	imports []string            // the module's packages it imports, relative
}

// loadModule parses every package of the module, every file whatever its
// build tags.
func loadModule(t *testing.T) map[string]*pkg {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	var modPath string
	for line := range strings.Lines(string(mod)) {
		if p, ok := strings.CutPrefix(line, "module "); ok {
			modPath = strings.TrimSpace(p)
			break
		}
	}
	if modPath == "" {
		t.Fatal("go.mod names no module")
	}
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if file != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(file))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		p := pkgs[rel]
		if p == nil {
			p = &pkg{path: rel, name: f.Name.Name, decls: map[string]bool{}, members: map[string][]string{}}
			pkgs[rel] = p
		}
		addFile(p, f, modPath)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("only %d packages found under %s: the walk of the module is broken", len(pkgs), root)
	}
	return pkgs
}

// addFile adds the declarations and the imports of f to p.
func addFile(p *pkg, f *ast.File, modPath string) {
	for _, im := range f.Imports {
		path, err := strconv.Unquote(im.Path.Value)
		if err != nil {
			continue
		}
		if rel, ok := strings.CutPrefix(path, modPath+"/"); ok && !slices.Contains(p.imports, rel) {
			p.imports = append(p.imports, rel)
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				p.decls[d.Name.Name] = true
				continue
			}
			if typ := receiverType(d.Recv.List[0].Type); typ != "" {
				p.members[typ] = append(p.members[typ], d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					p.decls[s.Name.Name] = true
					p.members[s.Name.Name] = append(p.members[s.Name.Name], typeMembers(s.Type)...)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						p.decls[n.Name] = true
					}
				}
			}
		}
	}
}

// receiverType names the type of a method's receiver: T of T, *T, T[K],
// *T[K].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// typeMembers names the fields (embedded ones by their type's name) of a
// struct type and the methods of an interface type.
func typeMembers(e ast.Expr) []string {
	var list *ast.FieldList
	switch x := e.(type) {
	case *ast.StructType:
		list = x.Fields
	case *ast.InterfaceType:
		list = x.Methods
	default:
		return nil
	}
	var out []string
	for _, f := range list.List {
		if len(f.Names) == 0 {
			if n := receiverType(f.Type); n != "" {
				out = append(out, n)
			} else if sel, ok := f.Type.(*ast.SelectorExpr); ok {
				out = append(out, sel.Sel.Name)
			}
			continue
		}
		for _, n := range f.Names {
			out = append(out, n.Name)
		}
	}
	return out
}

// byName returns the package a document means by name: a package path
// ("relay/embedded"), or a package clause's name that only one package
// of the module has ("proposal" for executor/proposal).
func byName(pkgs map[string]*pkg, name string) (*pkg, error) {
	if p, ok := pkgs[name]; ok {
		return p, nil
	}
	var found []*pkg
	for _, p := range pkgs {
		if p.name == name {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no package %s", name)
	case 1:
		return found[0], nil
	}
	paths := make([]string, len(found))
	for i, p := range found {
		paths[i] = p.path
	}
	slices.Sort(paths)
	return nil, fmt.Errorf("package name %s is ambiguous (%s): name it by its path", name, strings.Join(paths, ", "))
}

// resolve checks that the Go name ref (pkg.Name, pkg.Type.Member,
// pkg.(*Type).Method, or Type.Member of any package) is declared.
func resolve(pkgs map[string]*pkg, ref string) error {
	segs := strings.Split(strings.NewReplacer("(*", "", ")", "").Replace(ref), ".")
	if p, err := byName(pkgs, segs[0]); err == nil {
		switch rest := segs[1:]; len(rest) {
		case 1:
			if !p.decls[rest[0]] {
				return fmt.Errorf("package %s declares no %s", p.path, rest[0])
			}
			return nil
		case 2:
			if !p.decls[rest[0]] {
				return fmt.Errorf("package %s declares no type %s", p.path, rest[0])
			}
			if !slices.Contains(p.members[rest[0]], rest[1]) {
				return fmt.Errorf("%s.%s has no method or field %s", p.path, rest[0], rest[1])
			}
			return nil
		default:
			return fmt.Errorf("a name of %d parts after its package: not one this test reads", len(rest))
		}
	} else if strings.ToLower(segs[0]) == segs[0] {
		return err
	}
	if len(segs) != 2 {
		return fmt.Errorf("not pkg.Name, pkg.Type.Member nor Type.Member")
	}
	var in []string
	for _, p := range pkgs {
		if p.decls[segs[0]] {
			in = append(in, p.path)
			if slices.Contains(p.members[segs[0]], segs[1]) {
				return nil
			}
		}
	}
	if len(in) == 0 {
		return fmt.Errorf("no package declares a type %s", segs[0])
	}
	slices.Sort(in)
	return fmt.Errorf("type %s (of %s) has no method or field %s", segs[0], strings.Join(in, ", "), segs[1])
}

var (
	// goName is a dotted Go name: pkg.Name, pkg.Type.Method, Type.Member,
	// pkg.(*Type).Method.
	goName = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*(?:\.(?:\(\*[A-Za-z_][A-Za-z0-9_]*\)|[A-Za-z_][A-Za-z0-9_]*))+`)
	// pkgPath is a package path: identity, relay/embedded.
	pkgPath = regexp.MustCompile(`^[a-z][a-z0-9]*(?:/[a-z][a-z0-9]*)*$`)
	// backticked is a code span of one line.
	backticked = regexp.MustCompile("`([^`\n]+)`")
	// fileName ends as the names of files the document mentions.
	fileName = regexp.MustCompile(`\.(db|md|json|toml|go|sql|service)$`)
	// snapMethod is the name of a SNAP method, which reads as a path.
	snapMethod = regexp.MustCompile(`^(message|tasks|service)/[a-z]+$`)
	// exported is a bare exported name.
	exported = regexp.MustCompile(`^[A-Z][A-Za-z0-9_]*$`)
)

// A docName is a name the document uses, where it uses it.
type docName struct {
	line int
	text string
	pkg  string // the package of the table row it is in, when it is
}

// namesOf returns the Go names of doc: those in its code blocks, in its
// code spans, and the bare names (`Handler`) in the rows of a table
// whose first cell is a package.
func namesOf(doc string) (dotted, bare []docName, paths []docName) {
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			for _, m := range goName.FindAllString(line, -1) {
				dotted = append(dotted, docName{line: n, text: m})
			}
			continue
		}
		rowPkg := ""
		if strings.HasPrefix(line, "| `") {
			rowPkg = strings.Trim(strings.SplitN(line, "|", 3)[1], " `")
		}
		for _, m := range backticked.FindAllStringSubmatch(line, -1) {
			span := m[1]
			switch {
			case fileName.MatchString(span), snapMethod.MatchString(span):
			case goName.FindString(span) == span:
				dotted = append(dotted, docName{line: n, text: span})
			case pkgPath.MatchString(span) && (strings.Contains(span, "/") || span == rowPkg):
				paths = append(paths, docName{line: n, text: span})
			case rowPkg != "" && exported.MatchString(span):
				bare = append(bare, docName{line: n, text: span, pkg: rowPkg})
			}
		}
	}
	return dotted, bare, paths
}

const architecture = "docs/architecture.md"

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every Go name docs/architecture.md gives — of a function, a method, a
// type, a field, a package — is declared in the module under that name,
// so that the walk of a request it shows follows code that exists.
func TestArchitectureNamesExist(t *testing.T) {
	pkgs := loadModule(t)
	dotted, bare, paths := namesOf(readDoc(t, architecture))
	if len(dotted) < 20 || len(paths) < 10 {
		t.Fatalf("only %d Go names and %d package paths found in %s: the reading of the document is broken", len(dotted), len(paths), architecture)
	}
	for _, n := range dotted {
		if err := resolve(pkgs, n.text); err != nil {
			t.Errorf("%s:%d: %s: %v", architecture, n.line, n.text, err)
		}
	}
	for _, n := range paths {
		if _, ok := pkgs[n.text]; !ok {
			t.Errorf("%s:%d: %s: no such package in the module", architecture, n.line, n.text)
		}
	}
	for _, n := range bare {
		p, ok := pkgs[n.pkg]
		switch {
		case !ok:
			t.Errorf("%s:%d: %s: no such package in the module", architecture, n.line, n.pkg)
		case !p.decls[n.text]:
			t.Errorf("%s:%d: %s: package %s declares no %s", architecture, n.line, n.text, n.pkg, n.text)
		}
	}
}

// layers reads the layers of the document's sentence "Dependencies point
// downward: `a` → (`b`, `c`) → …", top first.
func layers(t *testing.T, doc string) [][]string {
	t.Helper()
	_, after, ok := strings.Cut(doc, "Dependencies point downward:")
	if !ok {
		t.Fatalf("%s has no sentence beginning \"Dependencies point downward:\"", architecture)
	}
	sentence, _, _ := strings.Cut(after, "\n\n")
	sentence, _, _ = strings.Cut(sentence, ".\n")
	var out [][]string
	for group := range strings.SplitSeq(sentence, "→") {
		var layer []string
		for _, m := range backticked.FindAllStringSubmatch(group, -1) {
			layer = append(layer, m[1])
		}
		if len(layer) == 0 {
			t.Fatalf("%s: a layer of the dependency sentence names no package: %q", architecture, group)
		}
		out = append(out, layer)
	}
	if len(out) < 4 {
		t.Fatalf("%s: the dependency sentence has %d layers: the reading of it is broken", architecture, len(out))
	}
	return out
}

// entryOf returns the entry of the dependency sentence that path belongs
// to: the longest that is path or a folder above it.
func entryOf(entries map[string]int, path string) (string, bool) {
	for p := path; ; {
		if _, ok := entries[p]; ok {
			return p, true
		}
		i := strings.LastIndex(p, "/")
		if i < 0 {
			return "", false
		}
		p = p[:i]
	}
}

// Every import between the module's packages points down the layers
// docs/architecture.md gives (a package with its sub-packages, unless
// they are named apart): none points up or sideways, to a package of its
// own layer. Every package outside internal/ that imports one of them,
// or is imported by one, is in a layer.
func TestArchitectureDependenciesPointDown(t *testing.T) {
	pkgs := loadModule(t)
	entries := map[string]int{} // entry → its layer, 0 at the top
	for i, layer := range layers(t, readDoc(t, architecture)) {
		for _, e := range layer {
			found := false
			for p := range pkgs {
				if p == e || strings.HasPrefix(p, e+"/") {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: the dependency sentence names %s, which is no package or folder of packages of the module", architecture, e)
			}
			entries[e] = i
		}
	}
	var paths []string
	for p := range pkgs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, path := range paths {
		from, fromOK := entryOf(entries, path)
		imports := slices.Sorted(slices.Values(pkgs[path].imports))
		for _, im := range imports {
			to, toOK := entryOf(entries, im)
			switch {
			case fromOK && toOK && from != to && entries[from] >= entries[to]:
				way := "up"
				if entries[from] == entries[to] {
					way = "sideways"
				}
				t.Errorf("%s imports %s: %s (layer %d of %s) points %s, to %s (layer %d)",
					path, im, from, entries[from]+1, architecture, way, to, entries[to]+1)
			case fromOK && !toOK && !strings.HasPrefix(im, "internal/"):
				t.Errorf("%s imports %s, which no layer of %s holds", path, im, architecture)
			case !fromOK && toOK && !strings.HasPrefix(path, "internal/"):
				t.Errorf("%s imports %s, and no layer of %s holds it", path, im, architecture)
			}
		}
	}
}
