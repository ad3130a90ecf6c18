// The mconn mode: CometBFT's own p2p/conn.MConnection over its
// SecretConnection, so that p2p-conn's MConnection can be tested against
// the real thing (interop/src/mconn_peer.rs drives it).

package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// mconnReport writes one JSON line per event on stdout, one write each, so
// that lines from the receive routine, the senders and the exit never mix.
type mconnReport struct {
	mu sync.Mutex
}

func (r *mconnReport) line(v any) {
	out, err := json.Marshal(v)
	if err != nil {
		fail(err.Error())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	os.Stdout.Write(append(out, '\n'))
}

// message is a received (or, with Sent, sent) message's line.
type message struct {
	Sent    bool   `json:"sent,omitempty"`
	Channel byte   `json:"channel"`
	Len     int    `json:"len"`
	SHA256  string `json:"sha256"`
}

func messageLine(sent bool, ch byte, msg []byte) message {
	sum := sha256.Sum256(msg)
	return message{Sent: sent, Channel: ch, Len: len(msg), SHA256: hex.EncodeToString(sum[:])}
}

// parseChannels reads ID:PRIORITY[:RECVCAP],...; IDs in any base Go reads
// (0x20, 32).
func parseChannels(text string) ([]*channelDescriptor, error) {
	var descs []*channelDescriptor
	seen := map[byte]bool{}
	for _, item := range strings.Split(text, ",") {
		parts := strings.Split(item, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("channel %q: want ID:PRIORITY[:RECVCAP]", item)
		}
		id, err := strconv.ParseUint(parts[0], 0, 8)
		if err != nil {
			return nil, fmt.Errorf("channel %q: id: %w", item, err)
		}
		prio, err := strconv.Atoi(parts[1])
		if err != nil || prio < 1 {
			return nil, fmt.Errorf("channel %q: priority must be a positive integer", item)
		}
		desc := &channelDescriptor{ID: byte(id), Priority: prio}
		if len(parts) == 3 {
			if desc.RecvMessageCapacity, err = strconv.Atoi(parts[2]); err != nil || desc.RecvMessageCapacity < 1 {
				return nil, fmt.Errorf("channel %q: receive capacity must be a positive integer", item)
			}
		}
		if seen[desc.ID] {
			return nil, fmt.Errorf("channel %#x given twice", desc.ID)
		}
		seen[desc.ID] = true
		descs = append(descs, desc)
	}
	return descs, nil
}

// sendSpec is one --send CH:SIZE:COUNT.
type sendSpec struct {
	channel     byte
	size, count int
}

func parseSend(text string) (sendSpec, error) {
	parts := strings.Split(text, ":")
	if len(parts) != 3 {
		return sendSpec{}, fmt.Errorf("--send %q: want CH:SIZE:COUNT", text)
	}
	ch, err := strconv.ParseUint(parts[0], 0, 8)
	if err != nil {
		return sendSpec{}, fmt.Errorf("--send %q: channel: %w", text, err)
	}
	size, err1 := strconv.Atoi(parts[1])
	count, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || size < 0 || count < 0 {
		return sendSpec{}, fmt.Errorf("--send %q: SIZE and COUNT must be integers >= 0", text)
	}
	return sendSpec{byte(ch), size, count}, nil
}

// stopped is the last line of a run that ended on its own (not by an
// error): why, and the connection's byte counts (CometBFT's flow monitors:
// packets read and written, pings and pongs included).
type stopped struct {
	Stopped   string `json:"stopped"`
	Received  int    `json:"received"`
	SentBytes int64  `json:"sent_bytes"`
	RecvBytes int64  `json:"recv_bytes"`
}

func mconnMode(mode string, args []string) error {
	fs := flag.NewFlagSet("mconn "+mode, flag.ContinueOnError)
	keyPath := fs.String("key", "", "node_key.json to use (default: a fresh key)")
	channels := fs.String("channels", "0x20:1", "channels, ID:PRIORITY[:RECVCAP],...")
	cfg := defaultMConnConfig()
	fs.DurationVar(&cfg.PingInterval, "ping-interval", cfg.PingInterval, "MConnConfig.PingInterval")
	fs.DurationVar(&cfg.PongTimeout, "pong-timeout", cfg.PongTimeout, "MConnConfig.PongTimeout (below the ping interval)")
	fs.IntVar(&cfg.MaxPacketMsgPayloadSize, "max-packet-payload", cfg.MaxPacketMsgPayloadSize, "MConnConfig.MaxPacketMsgPayloadSize")
	fs.DurationVar(&cfg.FlushThrottle, "flush-throttle", cfg.FlushThrottle, "MConnConfig.FlushThrottle")
	echo := fs.Bool("echo", false, "send every received message back on its channel")
	var sends []sendSpec
	fs.Func("send", "CH:SIZE:COUNT: send COUNT messages of SIZE random bytes (repeatable)", func(s string) error {
		spec, err := parseSend(s)
		sends = append(sends, spec)
		return err
	})
	exitAfter := fs.Int("exit-after", 0, "stop after this many received messages (0: never)")
	duration := fs.Duration("duration", 0, "stop after this long (0: never)")
	addr, err := onePositional(fs, args, "ADDR")
	if err != nil {
		return err
	}
	descs, err := parseChannels(*channels)
	if err != nil {
		return err
	}
	if cfg.PongTimeout >= cfg.PingInterval {
		return errors.New("--pong-timeout must be below --ping-interval")
	}
	tcp, sc, _, err := openSecret(mode, addr, *keyPath)
	if err != nil {
		return err
	}
	defer tcp.Close()
	fmt.Fprintf(os.Stderr, "peer %s\n", pubKeyToID(sc.RemotePubKey()))

	report := &mconnReport{}
	// The first reason to stop wins; main prints it and exits.
	done := make(chan string, 1)
	finish := func(why string) {
		select {
		case done <- why:
		default:
		}
	}
	var received int
	var recvMu sync.Mutex
	// Echoes go through a queue to their own goroutine: Send blocks while
	// the channel's send queue is full, and onReceive runs on the receive
	// routine, which must go on reading.
	echoes := make(chan [2]any, 4096)
	var mc *mConnection
	onReceive := func(ch byte, msg []byte) {
		report.line(messageLine(false, ch, msg))
		if *echo {
			echoes <- [2]any{ch, append([]byte(nil), msg...)}
		}
		recvMu.Lock()
		received++
		n := received
		recvMu.Unlock()
		if *exitAfter > 0 && n >= *exitAfter {
			finish(fmt.Sprintf("received %d", n))
		}
	}
	onError := func(r any) {
		report.line(map[string]string{"error": fmt.Sprint(r)})
		finish("")
	}
	mc = newMConnection(sc, descs, onReceive, onError, cfg)
	// Its channels log through their own logger, nil until set.
	mc.SetLogger(nopLogger())
	if err := mc.Start(); err != nil {
		return err
	}
	send := func(ch byte, msg []byte) {
		if mc.Send(ch, msg) {
			return
		}
		if mc.IsRunning() {
			fail(fmt.Sprintf("Send on channel %#x refused (no such channel here, or its queue stayed full)", ch))
		}
		// Stopped: onError reports why.
		select {}
	}
	go func() {
		for e := range echoes {
			send(e[0].(byte), e[1].([]byte))
		}
	}()
	for _, spec := range sends {
		go func(spec sendSpec) {
			for i := 0; i < spec.count; i++ {
				msg := make([]byte, spec.size)
				if _, err := rand.Read(msg); err != nil {
					fail(err.Error())
				}
				send(spec.channel, msg)
				report.line(messageLine(true, spec.channel, msg))
			}
		}(spec)
	}
	if *duration > 0 {
		time.AfterFunc(*duration, func() { finish("duration") })
	}
	why := <-done
	if why == "" {
		return nil
	}
	// Read before the stop, which ends the flow monitors.
	status := mc.Status()
	mc.FlushStop()
	recvMu.Lock()
	n := received
	recvMu.Unlock()
	report.line(stopped{Stopped: why, Received: n, SentBytes: status.SendMonitor.Bytes, RecvBytes: status.RecvMonitor.Bytes})
	return nil
}
