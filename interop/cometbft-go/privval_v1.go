//go:build cometbft_v1

// The privval package of v1.0.1: its Message (privval-reencode mode;
// package cometbft.privval.v1, in the api module), and what the
// remote-signer modes (privval_remote.go) use of it. Unlike the v0.x lines
// (privval_v0.go), GenFilePV takes a key generator, and SignVote says
// whether to sign the extension (the node's SignerClient always asks to).

package main

import (
	pvproto "github.com/cometbft/cometbft/api/cometbft/privval/v1"
	cmtproto "github.com/cometbft/cometbft/api/cometbft/types/v1"
	"net"
	"time"

	"github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/privval"
	"github.com/cometbft/cometbft/types"
)

var privvalReencode = reencodeOf[pvproto.Message]()

// privvalHandle answers a request as CometBFT's signer does (privval-handle).
var privvalHandle = handleOf[pvproto.Message](privval.DefaultValidationRequestHandler, types.PrivValidator(types.NewMockPV()))

type (
	filePV          = privval.FilePV
	pvPubKey        = crypto.PubKey
	pvVote          = cmtproto.Vote
	pvProposal      = cmtproto.Proposal
	pvBlockID       = cmtproto.BlockID
	pvPartSetHeader = cmtproto.PartSetHeader
	signedMsgType   = cmtproto.SignedMsgType
)

const (
	prevoteType   = cmtproto.PrevoteType
	precommitType = cmtproto.PrecommitType
	proposalType  = cmtproto.ProposalType
)

var (
	loadFilePV          = privval.LoadFilePV
	pvVoteSignBytes     = types.VoteSignBytes
	pvProposalSignBytes = types.ProposalSignBytes
)

func genFilePV(keyFile, stateFile string) (*filePV, error) {
	return privval.GenFilePV(keyFile, stateFile, func() (crypto.PrivKey, error) {
		return ed25519.GenPrivKey(), nil
	})
}

// timedPV is a FilePV whose SignVote calls are timed.
type timedPV struct {
	*privval.FilePV
	timer *signTimer
}

func (t timedPV) SignVote(chainID string, vote *cmtproto.Vote, signExtension bool) error {
	defer t.timer.record(time.Now())
	return t.FilePV.SignVote(chainID, vote, signExtension)
}

// startSigner runs CometBFT's SignerServer for pv, dialing the node at
// address over a SignerDialerEndpoint (tcp: a secret connection with a
// fresh key); with a timer, pv's SignVote calls are timed. stop stops it.
func startSigner(proto, address, chainID string, pv *filePV, timer *signTimer) (func() error, error) {
	var dialer privval.SocketDialer
	if proto == "unix" {
		dialer = privval.DialUnixFn(address)
	} else {
		dialer = privval.DialTCPFn(address, signerTimeoutReadWrite, ed25519.GenPrivKey())
	}
	endpoint := privval.NewSignerDialerEndpoint(
		log.NewNopLogger(), dialer,
		privval.SignerDialerEndpointTimeoutReadWrite(signerTimeoutReadWrite),
		privval.SignerDialerEndpointConnRetries(signerDialRetries),
		privval.SignerDialerEndpointRetryWaitInterval(signerRetryWait),
	)
	var served types.PrivValidator = pv
	if timer != nil {
		served = timedPV{pv, timer}
	}
	server := privval.NewSignerServer(endpoint, chainID, served)
	if err := server.Start(); err != nil {
		return nil, err
	}
	return server.Stop, nil
}

// nodeSide is a node's SignerClient over a SignerListenerEndpoint.
type nodeSide struct {
	listener net.Listener
	client   *privval.SignerClient
}

// listenNode listens as a node does for its remote signer (tcp: a secret
// connection with a fresh key).
func listenNode(proto, address, chainID string) (*nodeSide, error) {
	ln, err := net.Listen(proto, address)
	if err != nil {
		return nil, err
	}
	var listener net.Listener
	if proto == "unix" {
		listener = privval.NewUnixListener(ln)
	} else {
		listener = privval.NewTCPListener(ln, ed25519.GenPrivKey())
	}
	endpoint := privval.NewSignerListenerEndpoint(log.NewNopLogger(), listener)
	client, err := privval.NewSignerClient(endpoint, chainID)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &nodeSide{ln, client}, nil
}

// dialAddr is what a signer dials.
func (n *nodeSide) dialAddr() string { return nodeAddr(n.listener.Addr()) }

func (n *nodeSide) addr() net.Addr                         { return n.listener.Addr() }
func (n *nodeSide) close()                                 { _ = n.client.Close() }
func (n *nodeSide) waitForSigner(wait time.Duration) error { return n.client.WaitForConnection(wait) }
func (n *nodeSide) pubKey() (pvPubKey, error)              { return n.client.GetPubKey() }
func (n *nodeSide) signVote(chainID string, v *pvVote) error {
	return n.client.SignVote(chainID, v, true)
}
func (n *nodeSide) signProposal(chainID string, p *pvProposal) error {
	return n.client.SignProposal(chainID, p)
}
