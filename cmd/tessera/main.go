// Command tessera runs Kimi-K3-class models (KDA + gated MLA + LatentMoE +
// Block Attention Residuals) on the user's own machine.
//
// Usage:
//
//	tessera <command> [flags]
//
// Run "tessera help" for the list of commands and "tessera <command> --help"
// for the flags of one.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
)

// command is one subcommand of the tessera binary.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

// register adds a subcommand; each subcommand's file calls it from init.
func register(name, summary string, run func(args []string, stdout, stderr io.Writer) error) {
	if _, dup := commands[name]; dup {
		panic("tessera: command registered twice: " + name)
	}
	commands[name] = command{name: name, summary: summary, run: run}
}

// errUsage marks an error that was already explained by a usage message.
var errUsage = errors.New("usage")

// newFlags returns a FlagSet for a subcommand that prints its usage to stderr
// and returns errors instead of exiting.
func newFlags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: tessera %s %s\n\nflags:\n", name, usage)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; --help yields errHelp so the caller exits 0.
func parseFlags(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		return errHelp
	}
	if err != nil {
		return errUsage
	}
	return nil
}

var errHelp = errors.New("help")

func usage(w io.Writer) {
	fmt.Fprintln(w, "tessera — client-side runtime for Kimi-K3-class models")
	fmt.Fprintln(w, "\nusage: tessera <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'tessera <command> --help' for the flags of a command.")
}

func main() {
	if len(os.Args) > 1 && interruptible[os.Args[1]] {
		exitOnInterrupt(os.Args[1])
	}
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

// interruptible are the commands that compute until done and hold nothing
// that needs saving: Ctrl-C ends them at once (serve shuts down by itself).
var interruptible = map[string]bool{"run": true, "chat": true, "bench": true, "logits": true}

// exitOnInterrupt makes SIGINT (Ctrl-C) end the process promptly with one
// line on stderr and exit status 130 (128+SIGINT, as shells report it),
// rather than the runtime's default death by signal.
func exitOnInterrupt(name string) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt)
	go func() {
		<-c
		fmt.Fprintf(os.Stderr, "\ntessera %s: interrupted\n", name)
		os.Exit(130)
	}()
}

// runMain runs the CLI and returns the process exit code: 0 on success, 1 on
// an error, 2 on a usage error.
func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tessera: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	err := c.run(args[1:], stdout, stderr)
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errUsage):
		if err != errUsage {
			fmt.Fprintf(stderr, "tessera %s: %v\n", c.name, err)
		}
		return 2
	default:
		fmt.Fprintf(stderr, "tessera %s: %v\n", c.name, err)
		return 1
	}
}
