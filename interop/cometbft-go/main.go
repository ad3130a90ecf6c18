// cometbft-peer runs CometBFT's own Go SecretConnection
// (github.com/cometbft/cometbft/p2p/conn) as a peer and as a benchmark
// baseline for p2p-conn. One source builds against six CometBFT releases,
// one module file each; the CometBFT API it uses comes through
// cometbft.go, or compat_v034.go at v0.34 (Tendermint's import paths):
//
//	go build -tags cometbft_v1 -o cometbft-peer .                        # go.mod: v1.0.1
//	go build -modfile=go.v0.40.mod -o cometbft-peer .                    # v0.40.0
//	go build -modfile=go.v0.39.mod -o cometbft-peer .                    # v0.39.4
//	go build -modfile=go.v0.38.mod -o cometbft-peer .                    # v0.38.26
//	go build -modfile=go.v0.37.mod -tags cometbft_v037 -o cometbft-peer . # v0.37.18
//	go build -modfile=go.v0.34.mod -tags cometbft_v034 -o cometbft-peer . # v0.34.35
//
// Subcommands:
//
//	listen [-key F] [-chunk N] [-peer-id ID] [NODEINFO] ADDR   accept one connection
//	dial   [-key F] [-chunk N] [-peer-id ID] [NODEINFO] ADDR   dial one connection
//	    NODEINFO = -nodeinfo [-network N] [-channels HEX] [-moniker M]: after
//	    the handshake, exchange DefaultNodeInfo as p2p/transport.go does
//	    (both directions at once, protoio with MaxNodeInfoSize), then run the
//	    transport's checks on the peer's (Validate, NodeInfo ID = connection
//	    ID, CompatibleWith) and print "nodeinfo <JSON>" on stderr: the
//	    decoded fields, each check's error ("" when it passed), and the
//	    message as received and as CometBFT re-encodes it (hex). Exit 1 if a
//	    check failed, otherwise go on piping.
//	    After the handshake: "peer <id>" on stderr; stdin is written to the
//	    connection in Write calls of exactly -chunk bytes (the last may be
//	    shorter), then the TCP write side is half-closed; the connection is
//	    copied to stdout until the peer's stream ends. Exit 0 when both
//	    directions are done. listen prints "listening <addr>" first.
//	mconn listen|dial [-key F] [-channels ID:PRIO[:RECVCAP],...]
//	      [-ping-interval D] [-pong-timeout D] [-max-packet-payload N]
//	      [-flush-throttle D] [-echo] [-send CH:SIZE:COUNT]...
//	      [-exit-after N] [-duration D] ADDR
//	    (mconn.go) after the handshake (no NodeInfo), run CometBFT's own
//	    MConnection with those channels (default 0x20:1) and MConnConfig
//	    fields (CometBFT's defaults otherwise). On stdout, one JSON line
//	    each: a received message {"channel","len","sha256"}; a sent one
//	    (each -send: COUNT messages of SIZE random bytes, from the start)
//	    {"sent":true,"channel","len","sha256"}; the MConnection's onError
//	    {"error":"..."}, after which it exits 0; or, when -exit-after
//	    messages were received or -duration passed, {"stopped","received",
//	    "sent_bytes","recv_bytes"} after a FlushStop, and exit 0. -echo
//	    sends each received message back on its channel. "peer <id>" on
//	    stderr after the handshake (listen prints "listening <addr>" first).
//	keygen FILE        write a new node_key.json with CometBFT's code, print the ID
//	id FILE            print the node ID of a node_key.json
//	version            print the CometBFT module version built in
//	bench -size N -mib M [-producers P]
//	    in-process pair over loopback TCP, as `p2p-conn bench`: the dialer
//	    writes ceil(M MiB / N) messages of N bytes (one Write each), the
//	    listener reads with 64 KiB buffers and verifies every byte. Prints
//	    one JSON line: seconds from the first byte sent to the last byte
//	    verified, and the process CPU time (getrusage) over that span. With
//	    -producers P, P goroutines share the connection's Write, each
//	    sending its own numbered messages (as `p2p-conn bench --producers`).
//	handshake-serve ADDR    accept and handshake until stdin closes
//	handshake-dial -n N ADDR
//	    N sequential connections, each dial + handshake + close; prints one
//	    JSON line with the elapsed seconds.
//	hold -role peer ADDR
//	    accept connections until stdin closes: handshake each, then echo
//	    whatever arrives on it. Prints "listening <addr>" on stderr first.
//	hold -role holder [-n N] [-message B] [-concurrency C] ADDR
//	    dial N connections to a peer and hold them, each with one goroutine
//	    blocked in Read (as MConnection's recvRoutine), then send B bytes on
//	    each, one connection at a time, and wait for the echo. Prints one
//	    JSON line of RSS figures from /proc/self/status.
//	signbytes
//	    read JSON lines from stdin, {"kind": "vote"|"proposal"|"extension",
//	    "chain_id": S, "msg": M, "seconds": N, "nanos": N}, where M is the
//	    Vote or Proposal protobuf struct as encoding/json reads it (byte
//	    fields as arrays of numbers) and the timestamp is seconds and nanos
//	    after the epoch; print one line each: the hex of CometBFT's
//	    VoteSignBytes, ProposalSignBytes or VoteExtensionSignBytes,
//	    "unsupported" (extensions before v0.38), or "error: ..." (what
//	    CometBFT panicked or failed with).
//	privval-reencode
//	    read hex lines from stdin, each the body of a privval Message (no
//	    length prefix); decode each with the line's own generated Message
//	    type and print it re-encoded, in hex (fields the line does not
//	    declare are dropped), or "error: ...".
//	privval-handle
//	    read lines "CHAIN HEX" (a privval Message body) on stdin; answer
//	    each as CometBFT's own signer would, with the line's
//	    DefaultValidationRequestHandler over a MockPV (a key, no double-sign
//	    state) serving CHAIN, and print "response <hex>" (the response
//	    Message), "error: ..." (the handler's error), "panic: ..." (the
//	    handler panicked: CometBFT's canonicalization does on an invalid
//	    block ID) or "undecodable: ..." (the line's decoder refused the
//	    body).
//
// Remote-signer modes (privval_remote.go), with CometBFT's own privval
// package at the line built; ADDR is tcp://HOST:PORT (a secret connection,
// each side with a fresh key) or unix://PATH (plaintext):
//
//	privval-keygen -key F -state F
//	    write a new priv_validator_key.json and priv_validator_state.json
//	    with GenFilePV; print the public key (hex).
//	privval-signer -addr ADDR -key F -state F [-chain-id ID]
//	    a remote signer as CometBFT ships one: SignerServer with the FilePV
//	    of the two files (generated first if the key file is missing), over
//	    a SignerDialerEndpoint that dials ADDR, retrying every 50 ms for a
//	    minute (and again after a drop). Prints "pubkey <hex>" on stderr,
//	    serves until stdin closes.
//	privval-node [-addr ADDR] [-chain-id ID] [-n N] [-exts] [-wait D]
//	    a node's side: SignerListenerEndpoint on ADDR (default
//	    tcp://127.0.0.1:0) and SignerClient. Prints "listening <ADDR>" on
//	    stderr, waits for a signer, gets its public key, then signs N
//	    proposals, N prevotes and N precommits (heights 1..N, round 0,
//	    non-nil block IDs; at each height a proposal, a prevote, a
//	    precommit) and verifies each with CometBFT's own code
//	    (VerifySignature over VoteSignBytes / ProposalSignBytes, and for
//	    precommits from v0.38 over VoteExtensionSignBytes; -exts puts a
//	    non-empty extension on them). Then asks for a precommit for another
//	    block at height N, round 0, which must be refused. Prints one JSON
//	    line on stdout: {"pubkey", "votes", "proposals", "verified",
//	    "double_sign_refused", "rtt_us": {"p50", "p99"}, "error"}; exit 0
//	    only if everything was signed, verified and the conflict refused.
//	privval-bench [-n N] [-warmup W] [-unix]
//	    SignerClient and SignerServer in one process over loopback TCP
//	    (secret connection) or, with -unix, a Unix socket, with a FilePV on
//	    a temporary folder (its state file written on every signature, as
//	    in production). W prevotes, then N measured, at increasing heights:
//	    each SignerClient.SignVote call's round trip, and the time inside
//	    the FilePV's SignVote. Prints one JSON line: {"n", "rtt_p50_us",
//	    "rtt_p99_us", "sign_p50_us", "sign_p99_us", "transport_p50_us",
//	    "transport_p99_us" (round trip minus signing, per request), "warmup"}.
//	mconn-bench [-size S] [-n N] [-channels K] [-rate R] [-flush-throttle D]
//	    Two MConnections over one loopback connection in one process: K
//	    channels, N messages of S bytes each from one end, stamped; prints
//	    one JSON line with msgs/s, MB/s, CPU s/GiB and latency p50/p99
//	    (mconn_bench.go).
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const handshakeTimeout = 20 * time.Second

func main() {
	if len(os.Args) < 2 {
		fail("usage: cometbft-peer listen|dial|mconn|keygen|id|version|bench|handshake-serve|handshake-dial|hold|signbytes|privval-reencode|privval-handle|privval-keygen|privval-signer|privval-node|privval-bench|mconn-bench ...")
	}
	cmd, args := os.Args[1], os.Args[2:]
	var err error
	switch cmd {
	case "listen", "dial":
		err = pipe(cmd, args)
	case "mconn":
		if len(args) < 1 || (args[0] != "listen" && args[0] != "dial") {
			err = errors.New("usage: cometbft-peer mconn listen|dial [flags] ADDR")
		} else {
			err = mconnMode(args[0], args[1:])
		}
	case "keygen":
		err = keygen(args)
	case "id":
		err = id(args)
	case "version":
		fmt.Println(cometbftVersion())
	case "bench":
		err = bench(args)
	case "handshake-serve":
		err = handshakeServe(args)
	case "handshake-dial":
		err = handshakeDial(args)
	case "hold":
		err = hold(args)
	case "signbytes":
		err = signBytes(os.Stdin, os.Stdout)
	case "privval-reencode":
		err = privvalReencodeLines(os.Stdin, os.Stdout)
	case "privval-handle":
		err = privvalHandleLines(os.Stdin, os.Stdout)
	case "privval-keygen":
		err = privvalKeygen(args)
	case "privval-signer":
		err = privvalSigner(args)
	case "privval-node":
		err = privvalNode(args)
	case "privval-bench":
		err = privvalBench(args)
	case "mconn-bench":
		err = mconnBench(args)
	default:
		err = fmt.Errorf("unknown subcommand %q", cmd)
	}
	if err != nil {
		fail(err.Error())
	}
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "cometbft-peer:", msg)
	os.Exit(1)
}

// cometbftVersion is the version of the CometBFT module this binary was built with.
func cometbftVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == cometbftModule {
				// v0.34.x: github.com/tendermint/tendermint, replaced
				// by github.com/cometbft/cometbft at the version built.
				if dep.Replace != nil {
					return dep.Replace.Version
				}
				return dep.Version
			}
		}
	}
	return "unknown"
}

func onePositional(fs *flag.FlagSet, args []string, what string) (string, error) {
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() != 1 {
		return "", fmt.Errorf("%s: expected one %s argument, got %d", fs.Name(), what, fs.NArg())
	}
	return fs.Arg(0), nil
}

// privKey loads a node key file, or makes a fresh key when path is empty.
func privKey(path string) (privateKey, error) {
	if path == "" {
		return genPrivKey(), nil
	}
	nk, err := loadNodeKey(path)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	return nk.PrivKey, nil
}

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

// openTCP accepts one connection on addr (mode "listen", after printing
// "listening <addr>" on stderr) or dials addr.
func openTCP(mode, addr string) (*net.TCPConn, error) {
	if mode == "listen" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(os.Stderr, "listening %s\n", ln.Addr())
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			return nil, err
		}
		return c.(*net.TCPConn), nil
	}
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return nil, err
	}
	return c.(*net.TCPConn), nil
}

// handshake runs MakeSecretConnection under the handshake timeout.
// openSecret listens (one connection) or dials by mode, with the key file
// at keyPath (a fresh key when empty), and runs the handshake; the caller
// closes the TCP connection. Also returns the key it used.
func openSecret(mode, addr, keyPath string) (*net.TCPConn, *secretConnection, privateKey, error) {
	key, err := privKey(keyPath)
	if err != nil {
		return nil, nil, nil, err
	}
	tcp, err := openTCP(mode, addr)
	if err != nil {
		return nil, nil, nil, err
	}
	sc, err := handshake(tcp, key)
	if err != nil {
		tcp.Close()
		return nil, nil, nil, err
	}
	return tcp, sc, key, nil
}

func handshake(tcp net.Conn, key privateKey) (*secretConnection, error) {
	if err := tcp.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return nil, err
	}
	sc, err := makeSecretConnection(tcp, key)
	if err != nil {
		return nil, fmt.Errorf("handshake failed: %w", err)
	}
	return sc, tcp.SetDeadline(time.Time{})
}

func pipe(mode string, args []string) error {
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	keyPath := fs.String("key", "", "node_key.json to use (default: a fresh key)")
	chunk := fs.Int("chunk", 65536, "bytes per SecretConnection.Write call")
	peerID := fs.String("peer-id", "", "fail unless the peer's node ID is this")
	withNodeInfo := fs.Bool("nodeinfo", false, "exchange NodeInfo after the handshake")
	network := fs.String("network", "cometbft-peer-net", "network to announce (-nodeinfo)")
	channels := fs.String("channels", "", "channels to announce, hex (-nodeinfo)")
	moniker := fs.String("moniker", "cometbft-peer", "moniker to announce (-nodeinfo)")
	addr, err := onePositional(fs, args, "ADDR")
	if err != nil {
		return err
	}
	if *chunk < 1 {
		return errors.New("-chunk must be at least 1")
	}
	tcp, sc, key, err := openSecret(mode, addr, *keyPath)
	if err != nil {
		return err
	}
	defer tcp.Close()
	remote := pubKeyToID(sc.RemotePubKey())
	fmt.Fprintf(os.Stderr, "peer %s\n", remote)
	if *peerID != "" && string(remote) != *peerID {
		return fmt.Errorf("peer is %s, expected %s", remote, *peerID)
	}
	if *withNodeInfo {
		chs, err := hex.DecodeString(*channels)
		if err != nil {
			return fmt.Errorf("-channels: %w", err)
		}
		ours := nodeInfo{
			ProtocolVersion: protocolVersion(),
			DefaultNodeID:   pubKeyToID(key.PubKey()),
			ListenAddr:      tcp.LocalAddr().String(),
			Network:         *network,
			Version:         strings.TrimPrefix(cometbftVersion(), "v"),
			Channels:        chs,
			Moniker:         *moniker,
			Other:           nodeInfoOther{TxIndex: "off"},
		}
		if err := exchangeNodeInfo(sc, remote, ours); err != nil {
			return err
		}
	}

	sent := make(chan error, 1)
	go func() {
		buf := make([]byte, *chunk)
		for {
			n, err := io.ReadFull(os.Stdin, buf)
			if n > 0 {
				if _, werr := sc.Write(buf[:n]); werr != nil {
					sent <- werr
					return
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				sent <- tcp.CloseWrite()
				return
			}
			if err != nil {
				sent <- err
				return
			}
		}
	}()

	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	buf := make([]byte, 1<<16)
	for {
		n, err := sc.Read(buf)
		if n > 0 {
			if _, werr := out.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if err := <-sent; err != nil {
		return fmt.Errorf("sending: %w", err)
	}
	return nil
}

// exchangeNodeInfo is p2p/transport.go's handshake() and the checks of its
// upgrade(), with the peer's NodeInfo and the results printed on stderr.
func exchangeNodeInfo(sc *secretConnection, remote nodeID, ours nodeInfo) error {
	if err := sc.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return err
	}
	var raw bytes.Buffer
	pb := nodeInfo{}.ToProto()
	errc := make(chan error, 2)
	go func() {
		_, err := newDelimitedWriter(sc).WriteMsg(ours.ToProto())
		errc <- err
	}()
	go func() {
		// protoio reads the varint a byte at a time and then exactly the
		// message, so the tee sees the message and nothing after it.
		r := newDelimitedReader(io.TeeReader(sc, &raw), maxNodeInfoSize())
		_, err := r.ReadMsg(pb)
		errc <- err
	}()
	for i := 0; i < cap(errc); i++ {
		if err := <-errc; err != nil {
			return fmt.Errorf("nodeinfo exchange: %w", err)
		}
	}
	if err := sc.SetDeadline(time.Time{}); err != nil {
		return err
	}
	theirs, err := nodeInfoFromProto(pb)
	if err != nil {
		return err
	}
	reencoded, err := marshalDelimited(theirs.ToProto())
	if err != nil {
		return err
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	idErr := ""
	if theirs.ID() != remote {
		idErr = fmt.Sprintf("conn.ID (%v) NodeInfo.ID (%v) mismatch", remote, theirs.ID())
	}
	report := map[string]any{
		"id":          string(theirs.DefaultNodeID),
		"listen_addr": theirs.ListenAddr,
		"network":     theirs.Network,
		"version":     theirs.Version,
		"channels":    hex.EncodeToString(theirs.Channels),
		"moniker":     theirs.Moniker,
		"tx_index":    theirs.Other.TxIndex,
		"rpc_address": theirs.Other.RPCAddress,
		"p2p":         theirs.ProtocolVersion.P2P,
		"block":       theirs.ProtocolVersion.Block,
		"app":         theirs.ProtocolVersion.App,
		"validate":    errText(theirs.Validate()),
		"id_check":    idErr,
		"compatible":  errText(ours.CompatibleWith(theirs)),
		"received":    hex.EncodeToString(raw.Bytes()),
		"reencoded":   hex.EncodeToString(reencoded),
	}
	line, err := json.Marshal(report)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "nodeinfo %s\n", line)
	for _, e := range []string{report["validate"].(string), idErr, report["compatible"].(string)} {
		if e != "" {
			return fmt.Errorf("peer's NodeInfo refused: %s", e)
		}
	}
	return nil
}

// pattern is the byte pattern of `p2p-conn bench`: message i is
// pattern[i%251:][:size].
func pattern(size int) []byte {
	p := make([]byte, size+251)
	for k := range p {
		p[k] = byte(k*7 ^ (k>>8)*13)
	}
	return p
}

type cpuTimes struct{ user, sys float64 }

func cpuNow() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail(err.Error())
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return cpuTimes{tv(ru.Utime), tv(ru.Stime)}
}

// result is the one JSON line `bench` and `handshake-dial` print: the
// seconds of the measured span and the process CPU time (getrusage) over it.
type result struct {
	Impl       string   `json:"impl"`
	Size       int      `json:"size,omitempty"`
	Messages   int64    `json:"messages,omitempty"`
	Bytes      int64    `json:"bytes,omitempty"`
	Handshakes int      `json:"handshakes,omitempty"`
	Seconds    float64  `json:"seconds"`
	CPUUser    float64  `json:"cpu_user"`
	CPUSys     float64  `json:"cpu_sys"`
	LatP50us   *float64 `json:"lat_p50_us,omitempty"`
	LatP99us   *float64 `json:"lat_p99_us,omitempty"`
}

// percentiles gives the 50th and 99th percentile of samples (sorted here).
func percentiles(samples []uint32) (float64, float64) {
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	at := func(q float64) float64 {
		return float64(samples[int(math.Round(float64(len(samples)-1)*q))])
	}
	return at(0.50), at(0.99)
}

func (r result) print() error {
	out, err := json.Marshal(r)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

func bench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	size := fs.Int("size", 65536, "bytes per message (one Write each)")
	mib := fs.Int64("mib", 256, "MiB to send in all")
	producers := fs.Int("producers", 0, "goroutines sharing the connection's Write (0: one loop, the plain pattern)")
	rate := fs.Float64("rate", 0, "with -producers: messages per second in all, paced, with send-to-receive latency")
	if err := fs.Parse(args); err != nil {
		return err
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
	type done struct {
		at  time.Time
		cpu cpuTimes
		err error
	}
	recv := make(chan done, 1)
	go func() {
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			recv <- done{err: err}
			return
		}
		defer c.Close()
		sc, err := handshake(c, genPrivKey())
		if err != nil {
			recv <- done{err: err}
			return
		}
		buf := make([]byte, 1<<16)
		for {
			n, err := sc.Read(buf)
			if ferr := check.feed(buf[:n]); ferr != nil {
				recv <- done{err: ferr}
				return
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				recv <- done{err: err}
				return
			}
		}
		if !check.complete() {
			recv <- done{err: errors.New("stream ended early")}
			return
		}
		recv <- done{at: time.Now(), cpu: cpuNow()}
	}()

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

// checker verifies a received byte stream, whatever its chunking.
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

// signBytesFunc is one of CometBFT's sign-bytes functions, taking its
// message as JSON and its timestamp apart (encoding/json cannot set
// time.Time from seconds and nanos).
type signBytesFunc func(chainID string, msg json.RawMessage, ts time.Time) ([]byte, error)

// viaJSON adapts f (types.VoteSignBytes and the like, whose message type
// differs between the lines' proto packages) to a signBytesFunc. A panic
// in f (CometBFT panics on an invalid block ID) is returned as an error.
func viaJSON[M any](f func(string, *M) []byte) signBytesFunc {
	return func(chainID string, raw json.RawMessage, ts time.Time) (out []byte, err error) {
		m := new(M)
		if err := json.Unmarshal(raw, m); err != nil {
			return nil, err
		}
		field := reflect.ValueOf(m).Elem().FieldByName("Timestamp")
		if !field.IsValid() || field.Type() != reflect.TypeOf(ts) {
			return nil, fmt.Errorf("%T has no time.Time Timestamp", m)
		}
		field.Set(reflect.ValueOf(ts))
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return f(chainID, m), nil
	}
}

// signBytes is the signbytes subcommand.
func signBytes(in io.Reader, out io.Writer) error {
	type request struct {
		Kind    string          `json:"kind"`
		ChainID string          `json:"chain_id"`
		Msg     json.RawMessage `json:"msg"`
		Seconds int64           `json:"seconds"`
		Nanos   int64           `json:"nanos"`
	}
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 0, 1<<20), 16<<20)
	w := bufio.NewWriter(out)
	for scanner.Scan() {
		var req request
		if err := json.Unmarshal(scanner.Bytes(), &req); err != nil {
			return fmt.Errorf("signbytes: %w", err)
		}
		var f signBytesFunc
		switch req.Kind {
		case "vote":
			f = voteSignBytes
		case "proposal":
			f = proposalSignBytes
		case "extension":
			f = voteExtensionSignBytes
		default:
			return fmt.Errorf("signbytes: unknown kind %q", req.Kind)
		}
		if f == nil {
			fmt.Fprintln(w, "unsupported")
			continue
		}
		bz, err := f(req.ChainID, req.Msg, time.Unix(req.Seconds, req.Nanos).UTC())
		if err != nil {
			fmt.Fprintln(w, "error:", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Fprintln(w, hex.EncodeToString(bz))
	}
	if err := scanner.Err(); err != nil {
		return fmt.Errorf("signbytes: %w", err)
	}
	return w.Flush()
}

// gogoMessage is a gogoproto-generated message type M, through its pointer.
type gogoMessage[M any] interface {
	*M
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// reencodeOf returns a function that decodes a body as M and encodes it
// again (M is the line's privval Message: privval_v034.go, privval_v0.go,
// privval_v1.go).
func reencodeOf[M any, P gogoMessage[M]]() func([]byte) ([]byte, error) {
	return func(body []byte) ([]byte, error) {
		var m M
		if err := P(&m).Unmarshal(body); err != nil {
			return nil, err
		}
		return P(&m).Marshal()
	}
}

// privvalReencodeLines is the privval-reencode subcommand.
func privvalReencodeLines(in io.Reader, out io.Writer) error {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 0, 1<<20), 16<<20)
	w := bufio.NewWriter(out)
	for scanner.Scan() {
		body, err := hex.DecodeString(strings.TrimSpace(scanner.Text()))
		if err != nil {
			return fmt.Errorf("privval-reencode: %w", err)
		}
		again, err := privvalReencode(body)
		if err != nil {
			fmt.Fprintln(w, "error:", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Fprintln(w, hex.EncodeToString(again))
	}
	if err := scanner.Err(); err != nil {
		return fmt.Errorf("privval-reencode: %w", err)
	}
	return w.Flush()
}

// handleOf returns a function that decodes a body as M (the line's privval
// Message) and answers it with handler over pv, as CometBFT's SignerServer
// does; the outcome is one line of the privval-handle subcommand.
func handleOf[M any, P gogoMessage[M], V any](handler func(V, M, string) (M, error), pv V) func([]byte, string) (string, error) {
	return func(body []byte, chainID string) (outcome string, err error) {
		var m M
		if err := P(&m).Unmarshal(body); err != nil {
			return "undecodable: " + err.Error(), nil
		}
		defer func() {
			if r := recover(); r != nil {
				outcome, err = fmt.Sprintf("panic: %v", r), nil
			}
		}()
		res, herr := handler(pv, m, chainID)
		if herr != nil {
			return "error: " + herr.Error(), nil
		}
		bz, err := P(&res).Marshal()
		if err != nil {
			return "", err
		}
		return "response " + hex.EncodeToString(bz), nil
	}
}

// privvalHandleLines is the privval-handle subcommand.
func privvalHandleLines(in io.Reader, out io.Writer) error {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 0, 1<<20), 16<<20)
	w := bufio.NewWriter(out)
	for scanner.Scan() {
		chainID, text, ok := strings.Cut(strings.TrimSpace(scanner.Text()), " ")
		if !ok {
			return fmt.Errorf("privval-handle: want \"CHAIN HEX\", got %q", scanner.Text())
		}
		body, err := hex.DecodeString(text)
		if err != nil {
			return fmt.Errorf("privval-handle: %w", err)
		}
		outcome, err := privvalHandle(body, chainID)
		if err != nil {
			return fmt.Errorf("privval-handle: %w", err)
		}
		fmt.Fprintln(w, strings.ReplaceAll(outcome, "\n", " "))
	}
	if err := scanner.Err(); err != nil {
		return fmt.Errorf("privval-handle: %w", err)
	}
	return w.Flush()
}
