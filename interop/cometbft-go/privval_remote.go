// The remote-signer modes (privval-keygen, privval-signer, privval-node,
// privval-bench): CometBFT's own privval package, SignerServer over a
// SignerDialerEndpoint on the signer's side and SignerClient over a
// SignerListenerEndpoint on the node's, with a FilePV behind the server.
// What differs between the lines (import paths, the PrivValidator
// interface, GenFilePV's and SignVote's parameters) is in the line's
// privval_v*.go; the vote extension fields (from v0.38) in
// signbytes_ext.go, their absence in signbytes_noext.go.

package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// signTimer collects the time spent inside the PrivValidator's SignVote,
// one entry per call, in call order (the SignerServer serves one request at
// a time).
type signTimer struct {
	mu    sync.Mutex
	spent []time.Duration
}

func (t *signTimer) record(start time.Time) {
	d := time.Since(start)
	t.mu.Lock()
	t.spent = append(t.spent, d)
	t.mu.Unlock()
}

func (t *signTimer) take() []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.spent
	t.spent = nil
	return out
}

// splitAddr splits tcp://HOST:PORT, unix://PATH or (v0.40)
// noise://PEER@IP:PORT into the protocol and the rest.
func splitAddr(addr string) (string, string, error) {
	for _, proto := range []string{"tcp", "unix", "noise"} {
		if rest, ok := strings.CutPrefix(addr, proto+"://"); ok && rest != "" {
			if proto == "noise" && !lineHasNoise {
				return "", "", fmt.Errorf("address %q: %w", addr, errNoNoiseHere)
			}
			return proto, rest, nil
		}
	}
	return "", "", fmt.Errorf("address %q: want tcp://HOST:PORT, unix://PATH or noise://PEER@IP:PORT", addr)
}

var errNoNoiseHere = errors.New("noise:// remote signing is CometBFT v0.40's; this peer is built for another line")

// noiseKey is the libp2p identity on noise:// (-noise-key): the node's
// key in privval-node, the signer's in privval-signer.
var noiseKey privateKey

// loadNoiseKey reads -noise-key (a node_key.json, written first if
// missing), or makes a fresh key without one.
func loadNoiseKey(path string) error {
	if path == "" {
		noiseKey = genPrivKey()
		return nil
	}
	nk, err := loadOrGenNodeKey(path)
	if err != nil {
		return err
	}
	noiseKey = nk.PrivKey
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// loadOrGenFilePV loads the FilePV in keyFile and stateFile, first writing
// new ones with CometBFT's GenFilePV if the key file is missing.
func loadOrGenFilePV(keyFile, stateFile string) (*filePV, error) {
	if !fileExists(keyFile) {
		pv, err := genFilePV(keyFile, stateFile)
		if err != nil {
			return nil, err
		}
		pv.Save()
	}
	if !fileExists(stateFile) {
		return nil, fmt.Errorf("%s exists but %s does not", keyFile, stateFile)
	}
	return loadFilePV(keyFile, stateFile), nil
}

func pubKeyHex(pv *filePV) (string, error) {
	pk, err := pv.GetPubKey()
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(pk.Bytes()), nil
}

// privvalKeygen is the privval-keygen subcommand: a new
// priv_validator_key.json and priv_validator_state.json, written by
// CometBFT's GenFilePV; prints the public key (hex) on stdout.
func privvalKeygen(args []string) error {
	fs := flag.NewFlagSet("privval-keygen", flag.ContinueOnError)
	keyFile := fs.String("key", "", "priv_validator_key.json to write")
	stateFile := fs.String("state", "", "priv_validator_state.json to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *keyFile == "" || *stateFile == "" {
		return errors.New("privval-keygen: -key and -state are required")
	}
	pv, err := genFilePV(*keyFile, *stateFile)
	if err != nil {
		return err
	}
	pv.Save()
	pk, err := pubKeyHex(pv)
	if err != nil {
		return err
	}
	fmt.Println(pk)
	return nil
}

// privvalSigner is the privval-signer subcommand.
func privvalSigner(args []string) error {
	fs := flag.NewFlagSet("privval-signer", flag.ContinueOnError)
	addr := fs.String("addr", "", "the node's privval address: tcp://HOST:PORT or unix://PATH")
	keyFile := fs.String("key", "", "priv_validator_key.json (generated if missing)")
	stateFile := fs.String("state", "", "priv_validator_state.json (generated with the key)")
	chainID := fs.String("chain-id", "test-chain", "the chain ID the signer serves")
	noiseKeyFile := fs.String("noise-key", "", "noise://: the signer's libp2p identity, a node_key.json (written if missing)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loadNoiseKey(*noiseKeyFile); err != nil {
		return err
	}
	if *keyFile == "" || *stateFile == "" {
		return errors.New("privval-signer: -key and -state are required")
	}
	proto, address, err := splitAddr(*addr)
	if err != nil {
		return err
	}
	pv, err := loadOrGenFilePV(*keyFile, *stateFile)
	if err != nil {
		return err
	}
	pk, err := pubKeyHex(pv)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "pubkey", pk)
	stop, err := startSigner(proto, address, *chainID, pv, nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return stop()
}

// rttSummary is the p50 and p99 of a set of round trips, in microseconds.
type rttSummary struct {
	P50 int64 `json:"p50"`
	P99 int64 `json:"p99"`
}

// percentile is the q-th quantile (nearest rank) of ds, in microseconds;
// 0 for no samples.
func percentile(ds []time.Duration, q float64) int64 {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := int(q*float64(len(s))+0.999999) - 1
	if rank < 0 {
		rank = 0
	}
	if rank >= len(s) {
		rank = len(s) - 1
	}
	return s[rank].Microseconds()
}

// nodeReport is privval-node's JSON line.
type nodeReport struct {
	PubKey            string     `json:"pubkey"`
	Votes             int        `json:"votes"`
	Proposals         int        `json:"proposals"`
	Verified          int        `json:"verified"`
	DoubleSignRefused bool       `json:"double_sign_refused"`
	RTT               rttSummary `json:"rtt_us"`
	Error             string     `json:"error"`
}

// testBlockID is a non-nil block ID that differs per height and variant.
func testBlockID(height int64, variant byte) pvBlockID {
	hash := make([]byte, 32)
	parts := make([]byte, 32)
	for i := range hash {
		hash[i] = byte(height) ^ byte(i) ^ variant
		parts[i] = byte(height>>8) ^ byte(i) ^ 0x5a ^ variant
	}
	return pvBlockID{Hash: hash, PartSetHeader: pvPartSetHeader{Total: 1, Hash: parts}}
}

func testVote(msgType signedMsgType, height int64, round int32, variant byte) *pvVote {
	return &pvVote{
		Type:             msgType,
		Height:           height,
		Round:            round,
		BlockID:          testBlockID(height, variant),
		Timestamp:        time.Unix(1_700_000_000+height, 0).UTC(),
		ValidatorAddress: make([]byte, 20),
		ValidatorIndex:   0,
	}
}

func testProposal(height int64, round int32) *pvProposal {
	return &pvProposal{
		Type:      proposalType,
		Height:    height,
		Round:     round,
		PolRound:  -1,
		BlockID:   testBlockID(height, 0),
		Timestamp: time.Unix(1_700_000_000+height, 0).UTC(),
	}
}

// verifyVote checks a signed vote with CometBFT's own code: the vote's
// signature over VoteSignBytes and, at lines with extensions, a non-nil
// precommit's extension signature over VoteExtensionSignBytes.
func verifyVote(pk pvPubKey, chainID string, v *pvVote) error {
	if !pk.VerifySignature(pvVoteSignBytes(chainID, v), v.Signature) {
		return fmt.Errorf("vote at height %d type %d: bad signature", v.Height, v.Type)
	}
	if lineHasExtensions && v.Type == precommitType {
		_, sig := voteExtension(v)
		if !pk.VerifySignature(pvExtensionSignBytes(chainID, v), sig) {
			return fmt.Errorf("precommit at height %d: bad extension signature", v.Height)
		}
	}
	return nil
}

func verifyProposal(pk pvPubKey, chainID string, p *pvProposal) error {
	if !pk.VerifySignature(pvProposalSignBytes(chainID, p), p.Signature) {
		return fmt.Errorf("proposal at height %d: bad signature", p.Height)
	}
	return nil
}

// privvalNode is the privval-node subcommand.
func privvalNode(args []string) error {
	fs := flag.NewFlagSet("privval-node", flag.ContinueOnError)
	addr := fs.String("addr", "tcp://127.0.0.1:0", "where to listen: tcp://HOST:PORT or unix://PATH")
	chainID := fs.String("chain-id", "test-chain", "the chain ID of the requests")
	n := fs.Int("n", 10, "votes (prevote and precommit each) and proposals to sign")
	exts := fs.Bool("exts", false, "put a non-empty vote extension on the precommits (v0.38 and later)")
	wait := fs.Duration("wait", 60*time.Second, "how long to wait for the signer")
	noiseKeyFile := fs.String("noise-key", "", "noise://: the node's key, a node_key.json (written if missing; fresh without)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := loadNoiseKey(*noiseKeyFile); err != nil {
		return err
	}
	if *exts && !lineHasExtensions {
		return errors.New("privval-node -exts: this line has no vote extensions")
	}
	proto, address, err := splitAddr(*addr)
	if err != nil {
		return err
	}
	node, err := listenNode(proto, address, *chainID)
	if err != nil {
		return err
	}
	defer node.close()
	fmt.Fprintln(os.Stderr, "listening", node.dialAddr())

	report := nodeReport{}
	runErr := func() error {
		if err := node.waitForSigner(*wait); err != nil {
			return fmt.Errorf("waiting for the signer: %w", err)
		}
		fmt.Fprintln(os.Stderr, "signer connected")
		pk, err := node.pubKey()
		if err != nil {
			return fmt.Errorf("public key: %w", err)
		}
		report.PubKey = hex.EncodeToString(pk.Bytes())
		var rtts []time.Duration
		timed := func(f func() error) error {
			start := time.Now()
			err := f()
			rtts = append(rtts, time.Since(start))
			return err
		}
		defer func() {
			report.RTT = rttSummary{P50: percentile(rtts, 0.50), P99: percentile(rtts, 0.99)}
		}()
		for i := 0; i < *n; i++ {
			// Each height in the order a validator signs: proposal
			// (step 1), prevote (2), precommit (3).
			height := int64(i + 1)
			p := testProposal(height, 0)
			if err := timed(func() error { return node.signProposal(*chainID, p) }); err != nil {
				return fmt.Errorf("sign proposal at height %d: %w", height, err)
			}
			report.Proposals++
			if err := verifyProposal(pk, *chainID, p); err != nil {
				return err
			}
			report.Verified++
			for _, msgType := range []signedMsgType{prevoteType, precommitType} {
				v := testVote(msgType, height, 0, 0)
				if *exts && msgType == precommitType {
					setVoteExtension(v, []byte(fmt.Sprintf("extension at height %d", height)))
				}
				if err := timed(func() error { return node.signVote(*chainID, v) }); err != nil {
					return fmt.Errorf("sign vote at height %d type %d: %w", height, msgType, err)
				}
				report.Votes++
				if err := verifyVote(pk, *chainID, v); err != nil {
					return err
				}
				report.Verified++
			}
		}
		// A precommit for another block at the height, round and step of
		// the last one signed (height 0 if -n 0, which a signer refuses
		// too).
		conflict := testVote(precommitType, int64(*n), 0, 0xff)
		err = node.signVote(*chainID, conflict)
		report.DoubleSignRefused = err != nil
		if err == nil {
			return errors.New("the signer signed a conflicting precommit")
		}
		fmt.Fprintln(os.Stderr, "double sign refused:", err)
		return nil
	}()
	if runErr != nil {
		report.Error = runErr.Error()
	}
	line, err := json.Marshal(report)
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	if runErr != nil {
		return runErr
	}
	return nil
}

// benchReport is privval-bench's JSON line.
type benchReport struct {
	N              int   `json:"n"`
	RTTP50         int64 `json:"rtt_p50_us"`
	RTTP99         int64 `json:"rtt_p99_us"`
	SignP50        int64 `json:"sign_p50_us"`
	SignP99        int64 `json:"sign_p99_us"`
	TransportP50   int64 `json:"transport_p50_us"`
	TransportP99   int64 `json:"transport_p99_us"`
	WarmupRequests int   `json:"warmup"`
	// With -external: every measured round trip, in order (the signer
	// reports its own side).
	RTTs []int64 `json:"rtts_us,omitempty"`
	// With -serve: every measured signature's time inside the FilePV, in
	// order, for pairing with the node's round trips.
	Signs []int64 `json:"signs_us,omitempty"`
}

// privvalBench is the privval-bench subcommand.
func privvalBench(args []string) error {
	fs := flag.NewFlagSet("privval-bench", flag.ContinueOnError)
	n := fs.Int("n", 2000, "measured sign-vote requests")
	warmup := fs.Int("warmup", 200, "sign-vote requests before measuring")
	unix := fs.Bool("unix", false, "a Unix socket (plaintext) instead of loopback TCP (secret connection)")
	noise := fs.Bool("noise", false, "noise:// (v0.40.0): libp2p Noise over loopback TCP instead of the secret connection")
	external := fs.Bool("external", false, "no signer of our own: print `listening ADDR` on stderr, wait for one to dial, and report every round trip")
	serve := fs.String("serve", "", "no node of our own: a SignerServer with a FilePV dials `ADDR` (tcp:// or unix://, a privval-bench -external) and reports every measured signature's time")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *serve != "" && (*external || *noise || *unix) {
		return errors.New("privval-bench: -serve takes its transport from ADDR, without -external, -noise or -unix")
	}
	if *n < 1 {
		return errors.New("privval-bench: -n must be at least 1")
	}
	if *noise && !lineHasNoise {
		return errNoNoiseHere
	}
	const chainID = "bench-chain"
	dir, err := os.MkdirTemp("", "cometbft-privval-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pv, err := genFilePV(filepath.Join(dir, "priv_validator_key.json"), filepath.Join(dir, "priv_validator_state.json"))
	if err != nil {
		return err
	}
	pv.Save()
	if *serve != "" {
		return serveOnly(*serve, chainID, pv, *warmup+*n, *warmup, *n)
	}

	proto, address := "tcp", "127.0.0.1:0"
	if *unix {
		proto, address = "unix", filepath.Join(dir, "privval.sock")
	}
	// On noise:// the node and the signer each have a key of their own:
	// the node's laddr names the signer's peer ID, the signer dials the
	// node's.
	signerKey := genPrivKey()
	if *noise {
		signerID, err := libp2pID(signerKey)
		if err != nil {
			return err
		}
		proto, address = "noise", signerID+"@127.0.0.1:0"
		noiseKey = genPrivKey()
	}
	node, err := listenNode(proto, address, chainID)
	if err != nil {
		return err
	}
	defer node.close()
	dial := node.addr().String()
	if *noise {
		noiseKey = signerKey
		dial = strings.TrimPrefix(node.dialAddr(), "noise://")
	}
	timer := &signTimer{}
	if *external {
		if *noise {
			return errors.New("privval-bench: -external is tcp:// or -unix only")
		}
		fmt.Fprintln(os.Stderr, "listening", node.dialAddr())
	} else {
		stop, err := startSigner(proto, dial, chainID, pv, timer)
		if err != nil {
			return err
		}
		defer func() { _ = stop() }()
	}
	if err := node.waitForSigner(30 * time.Second); err != nil {
		return fmt.Errorf("waiting for the signer: %w", err)
	}

	height := int64(0)
	sign := func() (time.Duration, error) {
		height++
		v := testVote(prevoteType, height, 0, 0)
		start := time.Now()
		err := node.signVote(chainID, v)
		return time.Since(start), err
	}
	for i := 0; i < *warmup; i++ {
		if _, err := sign(); err != nil {
			return fmt.Errorf("warm-up request %d: %w", i, err)
		}
	}
	timer.take()
	rtts := make([]time.Duration, 0, *n)
	for i := 0; i < *n; i++ {
		d, err := sign()
		if err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		rtts = append(rtts, d)
	}
	if *external {
		report := benchReport{
			N:              *n,
			RTTP50:         percentile(rtts, 0.50),
			RTTP99:         percentile(rtts, 0.99),
			WarmupRequests: *warmup,
		}
		for _, d := range rtts {
			report.RTTs = append(report.RTTs, d.Microseconds())
		}
		line, err := json.Marshal(report)
		if err != nil {
			return err
		}
		fmt.Println(string(line))
		return nil
	}
	signs := timer.take()
	if len(signs) != len(rtts) {
		return fmt.Errorf("%d round trips but %d SignVote calls", len(rtts), len(signs))
	}
	transport := make([]time.Duration, len(rtts))
	for i := range rtts {
		transport[i] = rtts[i] - signs[i]
	}
	line, err := json.Marshal(benchReport{
		N:              *n,
		RTTP50:         percentile(rtts, 0.50),
		RTTP99:         percentile(rtts, 0.99),
		SignP50:        percentile(signs, 0.50),
		SignP99:        percentile(signs, 0.99),
		TransportP50:   percentile(transport, 0.50),
		TransportP99:   percentile(transport, 0.99),
		WarmupRequests: *warmup,
	})
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	return nil
}

// serveOnly is privval-bench -serve: CometBFT's SignerServer with a timed
// FilePV dials the node at addr (privval-bench -external, or p2p-conn's
// node side) and serves it until it has signed want votes; it then prints
// the times of the last n, the measured ones.
func serveOnly(addr, chainID string, pv *filePV, want, warmup, n int) error {
	proto, rest, err := splitAddr(addr)
	if err != nil {
		return err
	}
	if proto == "noise" {
		return errors.New("privval-bench: -serve is tcp:// or unix:// only")
	}
	timer := &signTimer{}
	stop, err := startSigner(proto, rest, chainID, pv, timer)
	if err != nil {
		return err
	}
	defer func() { _ = stop() }()
	var signs []time.Duration
	deadline := time.Now().Add(2 * time.Minute)
	for len(signs) < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("privval-bench -serve: the node asked for %d votes, not %d", len(signs), want)
		}
		time.Sleep(5 * time.Millisecond)
		signs = append(signs, timer.take()...)
	}
	measured := signs[warmup:want]
	report := benchReport{
		N:              n,
		SignP50:        percentile(measured, 0.50),
		SignP99:        percentile(measured, 0.99),
		WarmupRequests: warmup,
	}
	for _, d := range measured {
		report.Signs = append(report.Signs, d.Microseconds())
	}
	line, err := json.Marshal(report)
	if err != nil {
		return err
	}
	fmt.Println(string(line))
	return nil
}

// nodeAddr formats a listener's address as privval-signer's -addr takes it.
func nodeAddr(a net.Addr) string {
	return a.Network() + "://" + a.String()
}

// The signer's dialer: read/write timeout (longer than the node's ping
// interval, 2/3 of its 5 s timeout), and retries every 50 ms for a minute.
const (
	signerTimeoutReadWrite = 10 * time.Second
	signerDialRetries      = 1200
	signerRetryWait        = 50 * time.Millisecond
)
