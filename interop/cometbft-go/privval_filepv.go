//go:build !cometbft_v1

// The remote-signer modes' use of the privval package at v0.34.x to
// v0.40.x: one text for those lines, over the names privval_v0.go
// (v0.37.x to v0.40.x) and privval_v034.go (v0.34.x, Tendermint's import
// paths) declare. v1.0.1, whose GenFilePV and SignVote differ, has its own
// in privval_v1.go.

package main

import (
	"net"
	"strings"
	"time"
)

func genFilePV(keyFile, stateFile string) (*filePV, error) {
	return pvGenFilePV(keyFile, stateFile), nil
}

// timedPV is a FilePV whose SignVote calls are timed.
type timedPV struct {
	*filePV
	timer *signTimer
}

func (t timedPV) SignVote(chainID string, vote *pvVote) error {
	defer t.timer.record(time.Now())
	return t.filePV.SignVote(chainID, vote)
}

// startSigner runs CometBFT's SignerServer for pv, dialing the node at
// address over a SignerDialerEndpoint (tcp: a secret connection with a
// fresh key); with a timer, pv's SignVote calls are timed. stop stops it.
func startSigner(proto, address, chainID string, pv *filePV, timer *signTimer) (func() error, error) {
	var dialer pvSocketDialer
	switch proto {
	case "unix":
		dialer = pvDialUnixFn(address)
	case "noise":
		node, hostport, _ := strings.Cut(address, "@")
		d, err := noiseDialer(node, hostport, noiseKey, signerTimeoutReadWrite)
		if err != nil {
			return nil, err
		}
		dialer = d
	default:
		dialer = pvDialTCPFn(address, signerTimeoutReadWrite, pvGenPrivKey())
	}
	endpoint := pvNewSignerDialerEndpoint(
		pvNopLogger(), dialer,
		pvDialerTimeoutReadWrite(signerTimeoutReadWrite),
		pvDialerConnRetries(signerDialRetries),
		pvDialerRetryWaitInterval(signerRetryWait),
	)
	var served pvPrivValidator = pv
	if timer != nil {
		served = timedPV{pv, timer}
	}
	server := pvNewSignerServer(endpoint, chainID, served)
	if err := server.Start(); err != nil {
		return nil, err
	}
	return server.Stop, nil
}

// nodeSide is a node's SignerClient over a SignerListenerEndpoint.
type nodeSide struct {
	listener net.Listener
	client   *pvSignerClient
	// The node's libp2p peer ID, on noise://.
	peer string
}

// listenNode listens as a node does for its remote signer (tcp: a secret
// connection with a fresh key).
func listenNode(proto, address, chainID string) (*nodeSide, error) {
	if proto == "noise" {
		signer, hostport, _ := strings.Cut(address, "@")
		nl, self, err := noiseListen(signer, hostport, noiseKey)
		if err != nil {
			return nil, err
		}
		endpoint := pvNewSignerListenerEndpoint(pvNopLogger(), nl)
		client, err := pvNewSignerClient(endpoint, chainID)
		if err != nil {
			nl.Close()
			return nil, err
		}
		return &nodeSide{nl, client, self}, nil
	}
	ln, err := net.Listen(proto, address)
	if err != nil {
		return nil, err
	}
	var listener net.Listener
	if proto == "unix" {
		listener = pvNewUnixListener(ln)
	} else {
		listener = pvNewTCPListener(ln, pvGenPrivKey())
	}
	endpoint := pvNewSignerListenerEndpoint(pvNopLogger(), listener)
	client, err := pvNewSignerClient(endpoint, chainID)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &nodeSide{ln, client, ""}, nil
}

// dialAddr is what a signer dials: the listen address, and on noise://
// the node's peer ID.
func (n *nodeSide) dialAddr() string {
	if n.peer != "" {
		return "noise://" + n.peer + "@" + n.listener.Addr().String()
	}
	return nodeAddr(n.listener.Addr())
}

func (n *nodeSide) addr() net.Addr                           { return n.listener.Addr() }
func (n *nodeSide) close()                                   { _ = n.client.Close() }
func (n *nodeSide) waitForSigner(wait time.Duration) error   { return n.client.WaitForConnection(wait) }
func (n *nodeSide) pubKey() (pvPubKey, error)                { return n.client.GetPubKey() }
func (n *nodeSide) signVote(chainID string, v *pvVote) error { return n.client.SignVote(chainID, v) }
func (n *nodeSide) signProposal(chainID string, p *pvProposal) error {
	return n.client.SignProposal(chainID, p)
}
