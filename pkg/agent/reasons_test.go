package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
)

// TestReasonsListed keeps ConditionReasons and EventReasons, which the docs
// are checked against, complete: every Reason constant of the package is
// named in one of them.
func TestReasonsListed(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	consts, listed := sets.New[string](), sets.New[string]()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || (g.Tok != token.CONST && g.Tok != token.VAR) {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				for i, id := range v.Names {
					switch {
					case g.Tok == token.CONST && strings.HasPrefix(id.Name, "Reason"):
						consts.Insert(id.Name)
					case g.Tok == token.VAR && (id.Name == "ConditionReasons" || id.Name == "EventReasons"):
						for _, e := range v.Values[i].(*ast.CompositeLit).Elts {
							listed.Insert(e.(*ast.Ident).Name)
						}
					}
				}
			}
		}
	}
	if consts.Len() == 0 || listed.Len() == 0 {
		t.Fatalf("found %d Reason constants and %d listed reasons", consts.Len(), listed.Len())
	}
	for _, name := range sets.List(consts.Difference(listed)) {
		t.Errorf("%s is in neither ConditionReasons nor EventReasons", name)
	}
}
