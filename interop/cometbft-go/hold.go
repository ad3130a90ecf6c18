// The hold mode: many idle SecretConnections held open by one process,
// and the memory they take (RSS from /proc/self/status, and Go's own
// accounting).

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
)

// minReadBufferSize is the size of MConnection's bufConnReader, the buffered
// reader its recvRoutine reads packets through.
const minReadBufferSize = 1024

// procStatus is the process's resident set (VmRSS) and its peak (VmHWM), in
// KiB, from /proc/self/status.
type procStatus struct{ rss, hwm int64 }

func readStatus() (procStatus, error) {
	text, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return procStatus{}, err
	}
	var st procStatus
	found := 0
	for _, line := range strings.Split(string(text), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return procStatus{}, fmt.Errorf("/proc/self/status: %q: %w", line, err)
		}
		if key == "VmRSS" {
			st.rss = kib
		} else {
			st.hwm = kib
		}
		found++
	}
	if found != 2 {
		return procStatus{}, errors.New("/proc/self/status has no VmRSS or VmHWM")
	}
	return st, nil
}

// settledStatus collects garbage and returns freed memory to the OS
// (debug.FreeOSMemory) before reading the status: Go's best case, its heap
// down to what is live.
func settledStatus() (procStatus, error) {
	time.Sleep(200 * time.Millisecond)
	debug.FreeOSMemory()
	return readStatus()
}

// resetPeak resets VmHWM to the current RSS (writing "5" to
// /proc/self/clear_refs, Linux 4.0+); false where that is not permitted.
func resetPeak() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// holdResult is the one JSON line `hold -role holder` prints; `p2p-conn
// resources` reads the same fields from its own holder.
type holdResult struct {
	Impl        string `json:"impl"`
	Hold        string `json:"hold"`
	Connections int    `json:"connections"`
	Message     int    `json:"message"`
	// KiB: before dialing, with every connection idle after its handshake,
	// and after one message each way on every connection.
	RSSBefore  int64 `json:"rss_before_kib"`
	RSSIdle    int64 `json:"rss_idle_kib"`
	RSSMessage int64 `json:"rss_message_kib"`
	// VmHWM (KiB) when the connections were all idle (the peak of the
	// process so far), and at the end of the message pass: the peak of the
	// pass alone when PeakReset.
	HWMIdle   int64   `json:"hwm_idle_kib"`
	HWMPass   int64   `json:"hwm_pass_kib"`
	PeakReset bool    `json:"peak_reset"`
	Handshake float64 `json:"handshake_seconds"`
	Pass      float64 `json:"pass_seconds"`
	// Go's own accounting when idle and after the pass (KiB): heap in use
	// and goroutine stacks.
	GoHeapIdle     int64 `json:"go_heap_idle_kib"`
	GoStackIdle    int64 `json:"go_stack_idle_kib"`
	GoHeapMessage  int64 `json:"go_heap_message_kib"`
	GoStackMessage int64 `json:"go_stack_message_kib"`
	Goroutines     int   `json:"goroutines"`
}

func goMemory() (heap, stack int64) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse) / 1024, int64(m.StackInuse) / 1024
}

func hold(args []string) error {
	fs := flag.NewFlagSet("hold", flag.ContinueOnError)
	role := fs.String("role", "", "holder or peer")
	n := fs.Int("n", 10000, "holder: connections to hold")
	message := fs.Int("message", 100, "holder: bytes sent each way on every connection after the idle reading (0: none)")
	concurrency := fs.Int("concurrency", 64, "holder: handshakes in flight while connecting")
	addr, err := onePositional(fs, args, "ADDR")
	if err != nil {
		return err
	}
	switch *role {
	case "peer":
		return holdPeer(addr)
	case "holder":
		if *n < 1 || *message < 0 || *concurrency < 1 {
			return errors.New("-n and -concurrency must be at least 1, -message at least 0")
		}
		return holdConnections(addr, *n, *message, *concurrency)
	default:
		return fmt.Errorf("-role must be holder or peer, not %q", *role)
	}
}

// holdPeer accepts, handshakes and echoes until stdin closes.
func holdPeer(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "listening %s\n", ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	key := genPrivKey()
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			sc, err := handshake(c, key)
			if err != nil {
				fmt.Fprintln(os.Stderr, "cometbft-peer:", err)
				return
			}
			buf := make([]byte, minReadBufferSize)
			for {
				k, err := sc.Read(buf)
				if k > 0 {
					if _, err := sc.Write(buf[:k]); err != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	}
}

// holdConnections dials n connections to a `hold -role peer` at addr, holds
// them idle, then sends message bytes on each, one at a time, and waits for
// the echo.
func holdConnections(addr string, n, message, concurrency int) error {
	key := genPrivKey()
	dial := func() (*secretConnection, error) {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return nil, err
		}
		sc, err := handshake(c, key)
		if err != nil {
			c.Close()
		}
		return sc, err
	}
	msg := bytes.Repeat([]byte{0x5a}, max(message, 1))[:message]
	// Warm up (the runtime, the crypto code, the allocator) with one
	// connection used the same way, then closed.
	warm, err := dial()
	if err != nil {
		return err
	}
	if message > 0 {
		if _, err := warm.Write(msg); err != nil {
			return err
		}
		if _, err := io.ReadFull(warm, make([]byte, message)); err != nil {
			return err
		}
	}
	warm.Close()
	warm = nil

	before, err := settledStatus()
	if err != nil {
		return err
	}
	start := time.Now()
	conns := make([]*secretConnection, n)
	// Each reader goroutine reports here when a whole message has arrived.
	echoed := make(chan int, 1)
	var wg sync.WaitGroup
	errs := make(chan error, concurrency)
	slots := make(chan struct{}, concurrency)
	for i := 0; i < n; i++ {
		slots <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-slots }()
			sc, err := dial()
			if err != nil {
				select {
				case errs <- fmt.Errorf("connection %d: %w", i, err):
				default:
				}
				return
			}
			conns[i] = sc
			// As MConnection's recvRoutine: blocked in a read through a
			// 1 KiB buffered reader, for as long as the connection lives.
			go func() {
				r := bufio.NewReaderSize(sc, minReadBufferSize)
				got := 0
				for {
					if _, err := r.ReadByte(); err != nil {
						return
					}
					got++
					if got == message {
						got = 0
						echoed <- i
					}
				}
			}()
		}(i)
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	handshakeSeconds := time.Since(start).Seconds()
	idle, err := settledStatus()
	if err != nil {
		return err
	}
	heapIdle, stackIdle := goMemory()

	peakReset := resetPeak()
	start = time.Now()
	if message > 0 {
		for i, sc := range conns {
			if _, err := sc.Write(msg); err != nil {
				return fmt.Errorf("connection %d: %w", i, err)
			}
			select {
			case got := <-echoed:
				if got != i {
					return fmt.Errorf("echo on connection %d while waiting for %d", got, i)
				}
			case <-time.After(10 * time.Second):
				return fmt.Errorf("connection %d: no echo within 10 s", i)
			}
		}
	}
	passSeconds := time.Since(start).Seconds()
	after, err := settledStatus()
	if err != nil {
		return err
	}
	heapMessage, stackMessage := goMemory()
	r := holdResult{
		Impl:           "cometbft-go " + cometbftVersion(),
		Hold:           "read goroutine: SecretConnection, a goroutine blocked in Read through a 1 KiB bufio.Reader (MConnection's recvRoutine)",
		Connections:    n,
		Message:        message,
		RSSBefore:      before.rss,
		RSSIdle:        idle.rss,
		RSSMessage:     after.rss,
		HWMIdle:        idle.hwm,
		HWMPass:        after.hwm,
		PeakReset:      peakReset,
		Handshake:      handshakeSeconds,
		Pass:           passSeconds,
		GoHeapIdle:     heapIdle,
		GoStackIdle:    stackIdle,
		GoHeapMessage:  heapMessage,
		GoStackMessage: stackMessage,
		Goroutines:     runtime.NumGoroutine(),
	}
	out, err := json.Marshal(r)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	// The connections must stay referenced until the figures are taken.
	runtime.KeepAlive(conns)
	return nil
}
