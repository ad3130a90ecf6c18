//go:build cometbft_v034

// The privval package of v0.34.x, at Tendermint's import paths: its
// Message (privval-reencode mode) and the names privval_filepv.go uses.
// Below the imports this file is privval_v0.go's text; keep the two alike.

package main

import (
	"github.com/tendermint/tendermint/crypto"
	"github.com/tendermint/tendermint/crypto/ed25519"
	"github.com/tendermint/tendermint/libs/log"
	"github.com/tendermint/tendermint/privval"
	pvproto "github.com/tendermint/tendermint/proto/tendermint/privval"
	cmtproto "github.com/tendermint/tendermint/proto/tendermint/types"
	"github.com/tendermint/tendermint/types"
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
