package gateway

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The package doc (doc.go) lists every route constructor, the functions
// that return a Mount for New, with the file its routes live in, and
// names none that is gone.
func TestDocNamesEveryRouteConstructor(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var doc string
	constructors := map[string]string{} // name → file
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil {
			doc += f.Doc.Text()
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !fn.Name.IsExported() || fn.Type.Results == nil {
				continue
			}
			for _, r := range fn.Type.Results.List {
				if id, ok := r.Type.(*ast.Ident); ok && id.Name == "Mount" {
					constructors[fn.Name.Name] = name
				}
			}
		}
	}
	if doc == "" {
		t.Fatal("no package comment found")
	}
	if len(constructors) == 0 {
		t.Fatal("no function returning a Mount found")
	}
	for _, name := range slices.Sorted(maps.Keys(constructors)) {
		file := constructors[name]
		if !regexp.MustCompile(`\b` + name + `\b`).MatchString(doc) {
			t.Errorf("the package doc does not name the route constructor %s (%s)", name, file)
		}
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(file) + `\b`).MatchString(doc) {
			t.Errorf("the package doc does not name %s, the file of %s", file, name)
		}
	}
	var named []string
	for _, m := range regexp.MustCompile(`\b[A-Z][A-Za-z]*Routes\b`).FindAllString(doc, -1) {
		if _, ok := constructors[m]; !ok && !slices.Contains(named, m) {
			named = append(named, m)
			t.Errorf("the package doc names %s, which is no route constructor of the package", m)
		}
	}
}
