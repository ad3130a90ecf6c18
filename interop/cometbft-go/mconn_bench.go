// The mconn-bench mode: CometBFT's own MConnection at both ends of one
// loopback TCP connection (each end with its SecretConnection), in one
// process, as the baseline p2p-conn's MConnection benchmark runs beside
// (benches/scripts/mconn.sh). One JSON line on stdout.
//
// Workload: `-channels K` channels (0x20, 0x21, ...; priority 1 each), a
// sender goroutine per channel writing `-n` messages of `-size` bytes from
// the dialing end, each message stamped in its first 8 bytes with the
// nanoseconds since the run's start; the accepting end checks each
// message's length and stamp order per channel and takes its latency
// (receive time minus stamp). With `-rate R` the senders are paced to R
// messages per second in all, so the latency is the connection's, not a
// queue's. CPU is user + system time of the whole process over the run
// (both ends), from getrusage. With `-notsent-lowat B` the sending socket
// holds at most B bytes not yet sent (TCP_NOTSENT_LOWAT, Linux only), as
// p2p-conn's `mconn-bench --notsent-lowat` sets it; the report carries the
// value read back from the socket (0: not set).

package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"runtime"
	"sort"
	"sync"
	"syscall"
	"time"
)

type mconnBenchReport struct {
	Impl          string  `json:"impl"`
	Size          int     `json:"size"`
	Channels      int     `json:"channels"`
	Messages      int     `json:"messages"`
	Seconds       float64 `json:"seconds"`
	MsgsPerS      float64 `json:"msgs_per_s"`
	MBPerS        float64 `json:"mb_per_s"`
	CPUSeconds    float64 `json:"cpu_s"`
	CPUSPerGiB    float64 `json:"cpu_s_per_gib"`
	LatencyP50Us  float64 `json:"latency_p50_us"`
	LatencyP99Us  float64 `json:"latency_p99_us"`
	Rate          float64 `json:"rate"`
	FlushThrottle string  `json:"flush_throttle"`
	SendRate      int64   `json:"send_rate"`
	NotsentLowat  int     `json:"notsent_lowat"`
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail(err.Error())
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func mconnBench(args []string) error {
	fs := flag.NewFlagSet("mconn-bench", flag.ContinueOnError)
	size := fs.Int("size", 200, "message size in bytes (at least 8)")
	n := fs.Int("n", 100000, "messages per channel")
	channels := fs.Int("channels", 4, "channels (0x20 upwards)")
	rate := fs.Float64("rate", 0, "messages per second over all channels (0: as fast as it goes)")
	lowat := fs.Int("notsent-lowat", 0, "TCP_NOTSENT_LOWAT of the sending socket, bytes (0: not set)")
	cfg := defaultMConnConfig()
	fs.DurationVar(&cfg.FlushThrottle, "flush-throttle", cfg.FlushThrottle, "MConnConfig.FlushThrottle (the release's default unless given)")
	// The in-code defaults are 512000 B/s each way (a node's config.toml
	// sets 5120000); off here unless given, as p2p-conn's are.
	cfg.SendRate, cfg.RecvRate = 1<<40, 1<<40
	fs.Int64Var(&cfg.SendRate, "send-rate", cfg.SendRate, "MConnConfig.SendRate, bytes/s")
	fs.Int64Var(&cfg.RecvRate, "recv-rate", cfg.RecvRate, "MConnConfig.RecvRate, bytes/s")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *size < 8 || *n < 1 || *channels < 1 || *channels > 64 {
		return errors.New("mconn-bench: -size >= 8, -n >= 1, 1 <= -channels <= 64")
	}
	var descs []*channelDescriptor
	for i := 0; i < *channels; i++ {
		descs = append(descs, &channelDescriptor{
			ID: byte(0x20 + i), Priority: 1,
			SendQueueCapacity:   100,
			RecvMessageCapacity: *size + 1024,
		})
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	type accepted struct {
		c   net.Conn
		err error
	}
	acc := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		acc <- accepted{c, err}
	}()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	a := <-acc
	ln.Close()
	if a.err != nil {
		return a.err
	}
	lowatSet := 0
	if *lowat > 0 {
		if lowatSet, err = setNotsentLowat(dialed, *lowat); err != nil {
			return err
		}
	}
	type hs struct {
		sc  *secretConnection
		err error
	}
	hsc := make(chan hs, 1)
	go func() {
		sc, err := handshake(a.c, genPrivKey())
		hsc <- hs{sc, err}
	}()
	scDial, err := handshake(dialed, genPrivKey())
	if err != nil {
		return err
	}
	h := <-hsc
	if h.err != nil {
		return h.err
	}

	total := *n * *channels
	start := time.Now()
	var mu sync.Mutex
	latencies := make([]int64, 0, total)
	lastStamp := make([]int64, 256)
	done := make(chan struct{})
	failed := make(chan string, 1)
	failOnce := func(msg string) {
		select {
		case failed <- msg:
		default:
		}
	}
	onReceive := func(ch byte, msg []byte) {
		now := time.Since(start).Nanoseconds()
		if len(msg) != *size {
			failOnce(fmt.Sprintf("channel %#x: %d bytes, want %d", ch, len(msg), *size))
			return
		}
		stamp := int64(binary.LittleEndian.Uint64(msg))
		mu.Lock()
		if stamp < lastStamp[ch] {
			mu.Unlock()
			failOnce(fmt.Sprintf("channel %#x: out of order", ch))
			return
		}
		lastStamp[ch] = stamp
		latencies = append(latencies, now-stamp)
		if len(latencies) == total {
			close(done)
		}
		mu.Unlock()
	}
	onError := func(r any) { failOnce(fmt.Sprint(r)) }
	recv := newMConnection(h.sc, descs, onReceive, onError, cfg)
	recv.SetLogger(nopLogger())
	send := newMConnection(scDial, descs, func(byte, []byte) {}, onError, cfg)
	send.SetLogger(nopLogger())
	if err := recv.Start(); err != nil {
		return err
	}
	if err := send.Start(); err != nil {
		return err
	}
	cpu0 := cpuTime()
	start = time.Now()
	var interval time.Duration
	if *rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(*channels) / *rate)
	}
	for i := 0; i < *channels; i++ {
		go func(ch byte) {
			next := time.Now()
			for k := 0; k < *n; k++ {
				if interval > 0 {
					next = next.Add(interval)
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					}
				}
				msg := make([]byte, *size)
				binary.LittleEndian.PutUint64(msg, uint64(time.Since(start).Nanoseconds()))
				if !send.Send(ch, msg) {
					failOnce(fmt.Sprintf("Send on %#x refused", ch))
					return
				}
			}
		}(byte(0x20 + i))
	}
	select {
	case <-done:
	case msg := <-failed:
		return errors.New("mconn-bench: " + msg)
	}
	secs := time.Since(start).Seconds()
	cpu := (cpuTime() - cpu0).Seconds()
	send.Stop()
	recv.Stop()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	q := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))]) / 1e3
	}
	bytes := float64(total) * float64(*size)
	out, err := json.Marshal(mconnBenchReport{
		Impl: "cometbft-go " + cometbftVersion(), Size: *size, Channels: *channels,
		Messages: total, Seconds: secs, MsgsPerS: float64(total) / secs,
		MBPerS: bytes / secs / 1e6, CPUSeconds: cpu, CPUSPerGiB: cpu / (bytes / (1 << 30)),
		LatencyP50Us: q(0.50), LatencyP99Us: q(0.99), Rate: *rate,
		FlushThrottle: cfg.FlushThrottle.String(), SendRate: cfg.SendRate,
		NotsentLowat: lowatSet,
	})
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

// tcpNotsentLowat is Linux's TCP_NOTSENT_LOWAT (include/uapi/linux/tcp.h),
// which package syscall does not name.
const tcpNotsentLowat = 25

// setNotsentLowat sets TCP_NOTSENT_LOWAT on c and returns the value read
// back from the socket.
func setNotsentLowat(c net.Conn, v int) (int, error) {
	if runtime.GOOS != "linux" {
		return 0, errors.New("mconn-bench: -notsent-lowat is Linux only")
	}
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var got int
	var serr error
	err = raw.Control(func(fd uintptr) {
		if serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpNotsentLowat, v); serr == nil {
			got, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpNotsentLowat)
		}
	})
	if err != nil {
		return 0, err
	}
	return got, serr
}
