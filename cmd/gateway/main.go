// Command gateway serves lockgate's HTTP API. Run it with --dev to try it
// locally; see the README for the flags.
package main

import (
	"context"
	"fmt"
	"os"
)

func main() {
	if err := run(context.Background(), os.Args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "lockgate:", err)
		os.Exit(1)
	}
}
