package main

import "syscall"

// setParentDeathSignal asks Linux to SIGTERM the command if lockctl dies
// (SIGKILL, OOM killer): nobody renews its lease any more.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGTERM }
