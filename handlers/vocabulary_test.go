package handlers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestVocabularyAgrees: every problem code the error table can send, and
// every reason a not_holder carries, is in the README's list of stable
// codes and in openapi.yaml's enums, so that neither a reader nor a
// generated client meets one it was not told of.
func TestVocabularyAgrees(t *testing.T) {
	spec, err := GetSwagger()
	if err != nil {
		t.Fatal(err)
	}
	readme := readmeErrors(t)

	var codes []string
	add := func(p problem) {
		if c := string(p.code); !slices.Contains(codes, c) {
			codes = append(codes, c)
		}
	}
	for _, p := range engineProblems {
		add(p)
	}
	for _, g := range gatewayProblems {
		add(g.problem)
	}
	add(internalProblem)
	add(timedOut)
	slices.Sort(codes)
	specCodes := enumOf(t, spec.Components.Schemas["Problem"].Value.Properties["code"].Value.Enum)
	for _, c := range codes {
		if !slices.Contains(specCodes, c) {
			t.Errorf("code %s: the server sends it, openapi.yaml's Problem.code does not list it", c)
		}
		if !strings.Contains(readme, "`"+c+"`") {
			t.Errorf("code %s: the server sends it, the README's list of stable codes does not name it", c)
		}
	}

	reasons := lockReasons(t)
	if len(reasons) < 4 {
		t.Fatalf("found reasons %v in package locks, want at least released, expired, broken, unknown", reasons)
	}
	for name, s := range spec.Components.Schemas {
		if r := s.Value.Properties["reason"]; r != nil && r.Value != nil {
			if got := enumOf(t, r.Value.Enum); !slices.Equal(sorted(got), reasons) {
				t.Errorf("openapi.yaml's %s.reason lists %v, the server sends %v", name, sorted(got), reasons)
			}
		}
		for _, sub := range s.Value.AllOf {
			if r := sub.Value.Properties["reason"]; r != nil && r.Value != nil {
				if got := enumOf(t, r.Value.Enum); !slices.Equal(sorted(got), reasons) {
					t.Errorf("openapi.yaml's %s.reason lists %v, the server sends %v", name, sorted(got), reasons)
				}
			}
		}
	}
	m := regexp.MustCompile("`not_holder` \\([^)]*`reason`: ([^)]*)\\)").FindStringSubmatch(readme)
	if m == nil {
		t.Fatal("the README's list of codes does not give not_holder's reasons")
	}
	for _, r := range reasons {
		if !strings.Contains(m[1], "`"+r+"`") {
			t.Errorf("reason %s: the server sends it, the README's not_holder reasons (%s) do not name it", r, m[1])
		}
	}
}

// readmeErrors is the README's paragraph of stable codes.
func readmeErrors(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "Errors are `application/problem+json`")
	if start < 0 {
		t.Fatal("the README has no paragraph that starts \"Errors are `application/problem+json`\"")
	}
	end := strings.Index(s[start:], "\n\n")
	if end < 0 {
		end = len(s) - start
	}
	return s[start : start+end]
}

// lockReasons are the constants of type Reason that package locks
// declares: what a not_holder problem's reason can be.
func lockReasons(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "locks", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || vs.Type == nil {
				return true
			}
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Reason" {
				return true
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, _ := strconv.Unquote(lit.Value)
					reasons = append(reasons, s)
				}
			}
			return true
		})
	}
	return sorted(reasons)
}

func enumOf(t *testing.T, enum []any) []string {
	t.Helper()
	var out []string
	for _, e := range enum {
		s, ok := e.(string)
		if !ok {
			t.Fatalf("enum value %v is not a string", e)
		}
		out = append(out, s)
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
