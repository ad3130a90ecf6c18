// The handshake-serve and handshake-dial modes: handshakes one after
// another on fresh connections, timed on the dialing side.

package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func handshakeServe(args []string) error {
	fs := flag.NewFlagSet("handshake-serve", flag.ContinueOnError)
	addr, err := onePositional(fs, args, "ADDR")
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "listening %s\n", ln.Addr())
	go func() {
		// Serve until stdin closes.
		_, _ = io.Copy(io.Discard, os.Stdin)
		ln.Close()
	}()
	key := genPrivKey()
	for {
		c, err := ln.Accept()
		if err != nil {
			return nil
		}
		go func() {
			defer c.Close()
			if _, err := handshake(c, key); err != nil {
				fmt.Fprintln(os.Stderr, "cometbft-peer:", err)
			}
		}()
	}
}

func handshakeDial(args []string) error {
	fs := flag.NewFlagSet("handshake-dial", flag.ContinueOnError)
	n := fs.Int("n", 1000, "handshakes to run, one after another")
	addr, err := onePositional(fs, args, "ADDR")
	if err != nil {
		return err
	}
	key := genPrivKey()
	start, cpu0 := time.Now(), cpuNow()
	for i := 0; i < *n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		_, err = handshake(c, key)
		c.Close()
		if err != nil {
			return err
		}
	}
	elapsed, cpu := time.Since(start), cpuNow()
	return result{
		Impl:       "cometbft-go " + cometbftVersion(),
		Handshakes: *n,
		Seconds:    elapsed.Seconds(),
		CPUUser:    cpu.user - cpu0.user,
		CPUSys:     cpu.sys - cpu0.sys,
	}.print()
}
