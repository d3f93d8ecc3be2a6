package lua

import (
	"regexp"
	"strings"
	"testing"
)

// TestLibrariesDefineBeforeUse: in the text put in front of the scripts,
// each top-level local (a function, a constant) is defined above its first
// use. Lua reads a name used above its local's definition as a global, and
// Redis refuses a global only when that line runs: a library moved below
// one that uses it would fail on some path, not when the script loads.
func TestLibrariesDefineBeforeUse(t *testing.T) {
	for name, libs := range map[string]string{"lock": lockLib, "describe": describeLibs, "semaphore describe": semDescribeLibs, "semaphore": semLibs, "idempotency": idemLibs, "session": libSession} {
		code := luaCode(protocol + libs)
		def := regexp.MustCompile(`(?m)^local (?:function )?([A-Za-z_][A-Za-z0-9_]*(?:, [A-Za-z_][A-Za-z0-9_]*)*)`)
		for _, m := range def.FindAllStringSubmatchIndex(code, -1) {
			for _, local := range strings.Split(code[m[2]:m[3]], ", ") {
				// A use: the name, not a field (.name, :name) nor a table
				// key (name = ...).
				use := regexp.MustCompile(`(^|[^.:A-Za-z0-9_])` + local + `\b\s*(==|[^=\s]|$)`)
				if u := use.FindStringIndex(code); u != nil && u[0] < m[0] {
					line := strings.Count(code[:u[0]], "\n") + 1
					t.Errorf("%s libraries: %s is used (line %d of the code) above its definition (line %d)",
						name, local, line, strings.Count(code[:m[0]], "\n")+1)
				}
			}
		}
	}
}

// luaCode is src without its comments and the contents of its strings,
// line for line.
func luaCode(src string) string {
	var b strings.Builder
	for _, line := range strings.Split(src, "\n") {
		var quote byte
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case quote != 0 && c == '\\':
				i++
			case quote != 0 && c == quote:
				quote = 0
				b.WriteByte(c)
			case quote != 0:
			case c == '\'' || c == '"':
				quote = c
				b.WriteByte(c)
			case c == '-' && strings.HasPrefix(line[i:], "--"):
				i = len(line)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}
