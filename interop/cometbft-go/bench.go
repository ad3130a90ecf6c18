// The bench mode: a SecretConnection pair over loopback TCP in one
// process, as `p2p-conn bench`, with its messages' byte patterns and the
// checkers that verify them on arrival.

package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"sort"
	"time"
)

// pattern is the byte pattern of `p2p-conn bench`: message i is
// pattern[i%251:][:size].
func pattern(size int) []byte {
	p := make([]byte, size+251)
	for k := range p {
		p[k] = byte(k*7 ^ (k>>8)*13)
	}
	return p
}

// percentiles gives the 50th and 99th percentile of samples (sorted here).
func percentiles(samples []uint32) (float64, float64) {
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	at := func(q float64) float64 {
		return float64(samples[int(math.Round(float64(len(samples)-1)*q))])
	}
	return at(0.50), at(0.99)
}

func bench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	size := fs.Int("size", 65536, "bytes per message (one Write each)")
	mib := fs.Int64("mib", 256, "MiB to send in all")
	producers := fs.Int("producers", 0, "goroutines sharing the connection's Write (0: one loop, the plain pattern)")
	rate := fs.Float64("rate", 0, "with -producers: messages per second in all, paced, with send-to-receive latency")
	connections := fs.Int("connections", 1, "pairs at once, each sending its share of the messages (more than 1: without -producers)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *connections < 1 || (*connections > 1 && *producers > 0) {
		return errors.New("-connections must be at least 1, and 1 with -producers")
	}
	if *size < 1 || *mib < 0 || *producers < 0 || *producers > 255 {
		return errors.New("-size must be at least 1, -mib at least 0, -producers 0 to 255")
	}
	least := producerHeader
	if *rate > 0 {
		least += stampLen
	}
	if *producers > 0 && *size < least {
		return fmt.Errorf("-producers needs -size of at least %d", least)
	}
	t0 := time.Now()
	var stamp *time.Time
	if *rate > 0 && *producers > 0 {
		stamp = &t0
	}
	total := *mib << 20
	messages := (total + int64(*size) - 1) / int64(*size)
	if messages < 1 {
		messages = 1
	}
	if *connections > 1 {
		if int64(*connections) > messages {
			return fmt.Errorf("-connections %d is more than the %d messages", *connections, messages)
		}
		return benchConnections(*size, messages, *connections)
	}
	var check checker
	if *producers > 0 {
		per := (messages + int64(*producers) - 1) / int64(*producers)
		messages = per * int64(*producers)
		pc := newProducerChecker(*size, *producers, uint32(per))
		pc.t0 = stamp
		check = pc
	} else {
		check = &patternChecker{size: *size, messages: messages, pat: pattern(*size)}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	recv := make(chan received, 1)
	go acceptAndReceive(ln, check, recv)

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	defer c.Close()
	tcp := c.(*net.TCPConn)
	sc, err := handshake(tcp, genPrivKey())
	if err != nil {
		return err
	}
	start, cpu0 := time.Now(), cpuNow()
	if *producers == 0 {
		pat := pattern(*size)
		for i := int64(0); i < messages; i++ {
			off := int(i % 251)
			if _, err := sc.Write(pat[off : off+*size]); err != nil {
				return err
			}
		}
	} else {
		per := messages / int64(*producers)
		errs := make(chan error, *producers)
		for p := 0; p < *producers; p++ {
			go func(p byte) {
				msg := make([]byte, *size)
				base := producerBase(*size)
				perSecond := *rate / float64(*producers)
				for seq := uint32(0); int64(seq) < per; seq++ {
					if stamp != nil {
						due := t0.Add(time.Duration(float64(seq) / perSecond * float64(time.Second)))
						if d := time.Until(due); d > 0 {
							time.Sleep(d)
						}
					}
					producerMessage(msg, base, p, seq)
					if stamp != nil {
						binary.LittleEndian.PutUint64(msg[producerHeader:], uint64(time.Since(t0).Nanoseconds()))
					}
					if _, err := sc.Write(msg); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}(byte(p))
		}
		for p := 0; p < *producers; p++ {
			if err := <-errs; err != nil {
				return err
			}
		}
	}
	if err := tcp.CloseWrite(); err != nil {
		return err
	}
	d := <-recv
	if d.err != nil {
		return d.err
	}
	impl := "cometbft-go " + cometbftVersion()
	if *producers > 0 {
		impl = fmt.Sprintf("%s (%d goroutines)", impl, *producers)
	}
	r := result{
		Impl:     impl,
		Size:     *size,
		Messages: messages,
		Bytes:    messages * int64(*size),
		Seconds:  d.at.Sub(start).Seconds(),
		CPUUser:  d.cpu.user - cpu0.user,
		CPUSys:   d.cpu.sys - cpu0.sys,
	}
	if pc, ok := check.(*producerChecker); ok && len(pc.latencies) > 0 {
		p50, p99 := percentiles(pc.latencies)
		r.LatP50us, r.LatP99us = &p50, &p99
	}
	return r.print()
}

// received is how a listener's receiving ended: when and at what CPU time
// its last byte was verified, or why it failed.
type received struct {
	at  time.Time
	cpu cpuTimes
	err error
}

// acceptAndReceive takes ln's one connection (closing ln), receives and
// verifies its stream with check, and reports the end on out.
func acceptAndReceive(ln net.Listener, check checker, out chan<- received) {
	c, err := ln.Accept()
	ln.Close()
	if err != nil {
		out <- received{err: err}
		return
	}
	defer c.Close()
	if err := receive(c, check); err != nil {
		out <- received{err: err}
		return
	}
	out <- received{at: time.Now(), cpu: cpuNow()}
}

// share is connection c's part of messages spread over n connections, as
// `p2p-conn bench --connections` splits them: messages/n each, and one more
// for each of the first messages%n.
func share(messages int64, n, c int) int64 {
	s := messages / int64(n)
	if int64(c) < messages%int64(n) {
		s++
	}
	return s
}

// benchConnections is `bench -connections n`: n pairs over loopback TCP at
// once, connection c sending share(messages, n, c) messages of the plain
// pattern, each verified by its listener. Every pair completes its
// handshake first; the span runs from then (all senders start together) to
// the last listener's last byte verified, and the CPU is the whole
// process's over it.
func benchConnections(size int, messages int64, n int) error {
	ready := make(chan error, n)
	begin := make(chan struct{})
	sent := make(chan error, n)
	recv := make(chan received, n)
	pat := pattern(size)
	for c := 0; c < n; c++ {
		count := share(messages, n, c)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go acceptAndReceive(ln, &patternChecker{size: size, messages: count, pat: pat}, recv)
		go func() {
			conn, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				ready <- err
				return
			}
			defer conn.Close()
			tcp := conn.(*net.TCPConn)
			sc, err := handshake(tcp, genPrivKey())
			ready <- err
			if err != nil {
				return
			}
			<-begin
			for i := int64(0); i < count; i++ {
				off := int(i % 251)
				if _, err := sc.Write(pat[off : off+size]); err != nil {
					sent <- err
					return
				}
			}
			sent <- tcp.CloseWrite()
		}()
	}
	for c := 0; c < n; c++ {
		if err := <-ready; err != nil {
			return err
		}
	}
	start, cpu0 := time.Now(), cpuNow()
	close(begin)
	var last received
	for c := 0; c < 2*n; c++ {
		select {
		case err := <-sent:
			if err != nil {
				return err
			}
		case e := <-recv:
			if e.err != nil {
				return e.err
			}
			if e.at.After(last.at) {
				last = e
			}
		}
	}
	return result{
		Impl:        "cometbft-go " + cometbftVersion(),
		Size:        size,
		Messages:    messages,
		Bytes:       messages * int64(size),
		Connections: n,
		Seconds:     last.at.Sub(start).Seconds(),
		CPUUser:     last.cpu.user - cpu0.user,
		CPUSys:      last.cpu.sys - cpu0.sys,
	}.print()
}

// checker verifies a received byte stream, whatever its chunking.
// receive is the accepting end of one bench pair: the handshake, then
// every byte read in 64 KiB reads and fed to check, to the end of the
// stream, which must hold everything check expects.
func receive(c net.Conn, check checker) error {
	sc, err := handshake(c, genPrivKey())
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<16)
	for {
		n, err := sc.Read(buf)
		if ferr := check.feed(buf[:n]); ferr != nil {
			return ferr
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if !check.complete() {
		return errors.New("stream ended early")
	}
	return nil
}

type checker interface {
	feed(data []byte) error
	complete() bool
}

// patternChecker: message i is pattern[i%251:][:size].
type patternChecker struct {
	size     int
	messages int64
	pat      []byte
	msg      int64
	at       int
}

func (c *patternChecker) feed(data []byte) error {
	for len(data) > 0 {
		if c.msg >= c.messages {
			return errors.New("extra bytes after the last message")
		}
		off := int(c.msg % 251)
		want := c.pat[off+c.at : off+c.size]
		k := min(len(want), len(data))
		if string(data[:k]) != string(want[:k]) {
			return fmt.Errorf("message %d arrived corrupted", c.msg)
		}
		data = data[k:]
		c.at += k
		if c.at == c.size {
			c.at = 0
			c.msg++
		}
	}
	return nil
}

func (c *patternChecker) complete() bool { return c.msg == c.messages }

// producerHeader: producer (1 byte) and its sequence number (4 bytes, LE).
const producerHeader = 5

// stampLen: paced runs put the send time (nanoseconds since the run's start,
// LE) after the header; the pattern check skips it.
const stampLen = 8

// producerBase is byte k = k*7 of every producer message, before the
// per-message constant.
func producerBase(size int) []byte {
	b := make([]byte, size)
	for k := range b {
		b[k] = byte(k * 7)
	}
	return b
}

// xorInto sets dst[i] = src[i] ^ c, eight bytes at a time.
func xorInto(dst, src []byte, c byte) {
	c64 := uint64(c) * 0x0101010101010101
	i := 0
	for ; i+8 <= len(src); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(src[i:])^c64)
	}
	for ; i < len(src); i++ {
		dst[i] = src[i] ^ c
	}
}

// producerMessage fills msg as `p2p-conn bench --producers` does: header,
// then byte k = k*7 ^ p ^ seq.
func producerMessage(msg, base []byte, p byte, seq uint32) {
	xorInto(msg, base, p^byte(seq))
	msg[0] = p
	binary.LittleEndian.PutUint32(msg[1:5], seq)
}

// producerChecker: messages of every producer arrive whole, in its order.
type producerChecker struct {
	base  []byte
	per   uint32
	next  []uint32
	carry []byte
	want  []byte
	// Paced runs: the run's start and each message's latency (µs).
	t0        *time.Time
	latencies []uint32
}

func newProducerChecker(size, producers int, per uint32) *producerChecker {
	return &producerChecker{
		base: producerBase(size),
		per:  per,
		next: make([]uint32, producers),
		want: make([]byte, size),
	}
}

func (c *producerChecker) feed(data []byte) error {
	size := len(c.base)
	for len(data) > 0 {
		if len(c.carry) == 0 && len(data) >= size {
			if err := c.check(data[:size]); err != nil {
				return err
			}
			data = data[size:]
			continue
		}
		k := min(size-len(c.carry), len(data))
		c.carry = append(c.carry, data[:k]...)
		data = data[k:]
		if len(c.carry) < size {
			return nil
		}
		if err := c.check(c.carry); err != nil {
			return err
		}
		c.carry = c.carry[:0]
	}
	return nil
}

func (c *producerChecker) check(m []byte) error {
	p := int(m[0])
	if p >= len(c.next) {
		return fmt.Errorf("message from unknown producer %d", p)
	}
	seq := binary.LittleEndian.Uint32(m[1:5])
	if seq != c.next[p] || seq >= c.per {
		return fmt.Errorf("producer %d: message %d arrived, expected %d", p, seq, c.next[p])
	}
	producerMessage(c.want, c.base, byte(p), seq)
	from := 0
	if c.t0 != nil {
		sent := binary.LittleEndian.Uint64(m[producerHeader:])
		now := uint64(time.Since(*c.t0).Nanoseconds())
		if now > sent {
			c.latencies = append(c.latencies, uint32(min((now-sent)/1000, math.MaxUint32)))
		} else {
			c.latencies = append(c.latencies, 0)
		}
		// Header, then the pattern after the stamp.
		if !bytes.Equal(m[:producerHeader], c.want[:producerHeader]) {
			return fmt.Errorf("producer %d message %d arrived corrupted", p, seq)
		}
		from = producerHeader + stampLen
	}
	if !bytes.Equal(m[from:], c.want[from:]) {
		return fmt.Errorf("producer %d message %d arrived corrupted", p, seq)
	}
	c.next[p]++
	return nil
}

func (c *producerChecker) complete() bool {
	for _, n := range c.next {
		if n != c.per {
			return false
		}
	}
	return len(c.carry) == 0
}
