package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr))
}

// commands are lockctl's subcommands.
var commands = map[string]func(context.Context, cli, []string) error{
	"acquire": cmdAcquire,
	"release": cmdRelease,
	"renew":   cmdRenew,
	"status":  cmdStatus,
	"watch":   cmdWatch,
	"list":    cmdList,
	"break":   cmdBreak,
	"resize":  cmdResize,
	"run":     cmdRun,
	"token":   cmdToken,
	"session": cmdSession,
	"lockset": cmdLockSet,
}

// run is lockctl with its arguments (args[0] is the program name),
// environment and standard streams; it returns the exit code.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 2 {
		printHelp(stderr)
		return exitUsage
	}
	name, rest := args[1], args[2:]
	switch name {
	case "help", "-h", "-help", "--help":
		printHelp(stdout)
		return exitOK
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "lockctl: unknown command %q; run 'lockctl help'\n", name)
		return exitUsage
	}
	err := cmd(ctx, cli{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}, rest)
	var (
		st    exitStatus
		usage *usageError
	)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &st):
		return int(st)
	case errors.As(err, &usage):
		if !usage.printed {
			fmt.Fprintf(stderr, "lockctl %s: %v\nRun 'lockctl %s -h' for its flags.\n", name, err, name)
		}
		return exitUsage
	}
	// Error texts are lockctl's own or the gateway's problem details: they
	// never hold a JWT or an owner token.
	fmt.Fprintf(stderr, "lockctl: %v\n", err)
	return exitCode(err)
}
