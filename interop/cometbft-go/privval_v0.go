//go:build !cometbft_v034 && !cometbft_v1

// The privval package of v0.37.x to v0.40.x: its Message (privval-reencode
// mode), and the names the remote-signer modes use of it, for
// privval_filepv.go. v1.0.1's is in privval_v1.go, v0.34.x's in
// privval_v034.go (the same text at Tendermint's import paths).

package main

import (
	"github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/privval"
	pvproto "github.com/cometbft/cometbft/proto/tendermint/privval"
	cmtproto "github.com/cometbft/cometbft/proto/tendermint/types"
	"github.com/cometbft/cometbft/types"
)

var privvalReencode = reencodeOf[pvproto.Message]()

// privvalHandle answers a request as CometBFT's signer does (privval-handle).
var privvalHandle = handleOf[pvproto.Message](privval.DefaultValidationRequestHandler, types.PrivValidator(types.NewMockPV()))

// The names privval_filepv.go (and privval_remote.go) use.
type (
	filePV          = privval.FilePV
	pvPubKey        = crypto.PubKey
	pvVote          = cmtproto.Vote
	pvProposal      = cmtproto.Proposal
	pvBlockID       = cmtproto.BlockID
	pvPartSetHeader = cmtproto.PartSetHeader
	signedMsgType   = cmtproto.SignedMsgType
	pvPrivValidator = types.PrivValidator
	pvSocketDialer  = privval.SocketDialer
	pvSignerClient  = privval.SignerClient
)

const (
	prevoteType   = cmtproto.PrevoteType
	precommitType = cmtproto.PrecommitType
	proposalType  = cmtproto.ProposalType
)

var (
	loadFilePV                  = privval.LoadFilePV
	pvGenFilePV                 = privval.GenFilePV
	pvVoteSignBytes             = types.VoteSignBytes
	pvProposalSignBytes         = types.ProposalSignBytes
	pvGenPrivKey                = ed25519.GenPrivKey
	pvNopLogger                 = log.NewNopLogger
	pvDialUnixFn                = privval.DialUnixFn
	pvDialTCPFn                 = privval.DialTCPFn
	pvNewSignerDialerEndpoint   = privval.NewSignerDialerEndpoint
	pvDialerTimeoutReadWrite    = privval.SignerDialerEndpointTimeoutReadWrite
	pvDialerConnRetries         = privval.SignerDialerEndpointConnRetries
	pvDialerRetryWaitInterval   = privval.SignerDialerEndpointRetryWaitInterval
	pvNewSignerServer           = privval.NewSignerServer
	pvNewUnixListener           = privval.NewUnixListener
	pvNewTCPListener            = privval.NewTCPListener
	pvNewSignerListenerEndpoint = privval.NewSignerListenerEndpoint
	pvNewSignerClient           = privval.NewSignerClient
)
