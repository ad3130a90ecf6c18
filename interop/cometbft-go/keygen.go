// The keygen and id modes: a node_key.json written, or read, with
// CometBFT's own code.

package main

import (
	"flag"
	"fmt"
	"os"
)

func keygen(args []string) error {
	fs := flag.NewFlagSet("keygen", flag.ContinueOnError)
	path, err := onePositional(fs, args, "FILE")
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists; not replacing it", path)
	}
	nk, err := loadOrGenNodeKey(path)
	if err != nil {
		return err
	}
	fmt.Println(nk.ID())
	return nil
}

func id(args []string) error {
	fs := flag.NewFlagSet("id", flag.ContinueOnError)
	path, err := onePositional(fs, args, "FILE")
	if err != nil {
		return err
	}
	nk, err := loadNodeKey(path)
	if err != nil {
		return err
	}
	fmt.Println(nk.ID())
	return nil
}
