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
// Each subcommand's code is in a file of its own: listen and dial in
// peer.go, keygen and id in keygen.go, handshake-serve and handshake-dial in
// handshake.go, the others in the file named after them (bench.go, hold.go,
// signbytes.go, privval_reencode.go, privval_handle.go, mconn.go,
// mconn_bench.go; the remote-signer modes in privval_remote.go). This file
// has the dispatch and what the subcommands share.
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
//	bench -size N -mib M [-producers P] [-connections C]
//	    in-process pair over loopback TCP, as `p2p-conn bench`: the dialer
//	    writes ceil(M MiB / N) messages of N bytes (one Write each), the
//	    listener reads with 64 KiB buffers and verifies every byte. Prints
//	    one JSON line: seconds from the first byte sent to the last byte
//	    verified, and the process CPU time (getrusage) over that span. With
//	    -producers P, P goroutines share the connection's Write, each
//	    sending its own numbered messages (as `p2p-conn bench --producers`).
//	    With -connections C (C > 1, no -producers), C pairs run at once,
//	    connection c sending its share of the messages (messages/C, one
//	    more for the first messages%C); the span runs from the moment all
//	    C handshakes are done to the last byte verified, and the JSON line
//	    carries "connections".
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
//	    [-notsent-lowat B]
//	    Two MConnections over one loopback connection in one process: K
//	    channels, N messages of S bytes each from one end, stamped; prints
//	    one JSON line with msgs/s, MB/s, CPU s/GiB and latency p50/p99
//	    (mconn_bench.go).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime/debug"
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

// handshake runs MakeSecretConnection under the handshake timeout.
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
// seconds of the measured span and the process CPU time (getrusage) over it,
// and bench's -connections when more than one.
type result struct {
	Impl        string   `json:"impl"`
	Size        int      `json:"size,omitempty"`
	Messages    int64    `json:"messages,omitempty"`
	Bytes       int64    `json:"bytes,omitempty"`
	Handshakes  int      `json:"handshakes,omitempty"`
	Connections int      `json:"connections,omitempty"`
	Seconds     float64  `json:"seconds"`
	CPUUser     float64  `json:"cpu_user"`
	CPUSys      float64  `json:"cpu_sys"`
	LatP50us    *float64 `json:"lat_p50_us,omitempty"`
	LatP99us    *float64 `json:"lat_p99_us,omitempty"`
}

func (r result) print() error {
	out, err := json.Marshal(r)
	if err != nil {
		return err
	}
	fmt.Println(string(out))
	return nil
}

// gogoMessage is a gogoproto-generated message type M, through its pointer.
type gogoMessage[M any] interface {
	*M
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}
