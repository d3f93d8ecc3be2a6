package app

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// repoRoot is the repository, from this package's directory.
var repoRoot = filepath.Join("..", "..", "..")

// TestDockerfileBuildCommand runs the build stage's `go build` line of the
// Dockerfile as it is, with only its output directory moved to a temporary
// one, so that the image build cannot drift from the code (a moved main
// package, a flag the toolchain dropped) without a test failing. It also
// checks that the final stage copies what the build stage wrote, and that
// the builder image's Go is the go.mod's.
func TestDockerfileBuildCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gateway")
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var build, from, copyFrom string
	stage := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "FROM "):
			fields := strings.Fields(line)
			stage = fields[len(fields)-1]
			if stage == "build" {
				from = fields[1]
			}
		case stage == "build" && strings.HasPrefix(line, "RUN ") && strings.Contains(line, "go build"):
			if build != "" {
				t.Fatalf("two go build lines in the build stage; this test runs one")
			}
			build = strings.TrimPrefix(line, "RUN ")
		case stage != "build" && strings.HasPrefix(line, "COPY --from=build "):
			copyFrom = strings.Fields(line)[2]
		}
	}
	if build == "" || strings.HasSuffix(build, "\\") {
		t.Fatalf("no one-line `RUN ... go build ...` in the Dockerfile's build stage (got %q)", build)
	}
	out := regexp.MustCompile(`-o (\S+)`).FindStringSubmatch(build)
	if out == nil {
		t.Fatalf("the build line %q has no -o", build)
	}
	if copyFrom != out[1] {
		t.Fatalf("the final stage copies %q, the build stage writes %q", copyFrom, out[1])
	}

	gomod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(gomod)
	if goVersion == nil || from != "golang:"+string(goVersion[1]) {
		t.Fatalf("the build stage is FROM %s; go.mod asks for go %s", from, goVersion[1])
	}

	bin := filepath.Join(t.TempDir(), "gateway")
	cmdline := strings.Replace(build, "-o "+out[1], "-o "+bin, 1)
	cmd := exec.CommandContext(t.Context(), "sh", "-c", cmdline)
	cmd.Dir = repoRoot
	if outp, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, outp)
	}
	// The image's binary runs: -h prints the flags and exits 0.
	help, err := exec.CommandContext(t.Context(), bin, "-h").CombinedOutput()
	if err != nil || !strings.Contains(string(help), "-redis-url") {
		t.Fatalf("%s -h: %v\n%s", bin, err, help)
	}
}

// TestComposeEnvironmentIsKnown: every LOCKGATE_ variable that
// docker-compose.yml gives the gateway names a flag, and the gateway
// accepts the values (with a stand-in for the secret the file asks for).
func TestComposeEnvironmentIsKnown(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	gw, ok := compose.Services["gateway"]
	if !ok || len(gw.Environment) == 0 {
		t.Fatal("docker-compose.yml: no gateway service with an environment")
	}
	var usage strings.Builder
	parseConfig([]string{"gateway", "-h"}, func(string) string { return "" }, &usage)
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z-]+)`).FindAllStringSubmatch(usage.String(), -1) {
		known[envName(m[1])] = true
	}
	env := map[string]string{}
	for k, v := range gw.Environment {
		if !known[k] {
			t.Errorf("docker-compose.yml sets %s, which no gateway flag reads", k)
		}
		if strings.HasPrefix(v, "${") {
			v = "compose-stand-in-secret-0123456789-abcdef"
		}
		env[k] = v
	}
	if _, err := parseConfig([]string{"gateway"}, func(k string) string { return env[k] }, &strings.Builder{}); err != nil {
		t.Fatalf("the gateway refuses docker-compose.yml's environment: %v", err)
	}
}
