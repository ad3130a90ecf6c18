//go:build !cometbft_v034

// The CometBFT API the program uses, from the packages of
// github.com/cometbft/cometbft (v0.37 and later). compat_v034.go is this
// file for v0.34.x, whose packages keep Tendermint's import paths: keep the
// two alike below the imports.

package main

import (
	"github.com/cometbft/cometbft/crypto"
	"github.com/cometbft/cometbft/crypto/ed25519"
	"github.com/cometbft/cometbft/libs/log"
	"github.com/cometbft/cometbft/libs/protoio"
	"github.com/cometbft/cometbft/p2p"
	"github.com/cometbft/cometbft/p2p/conn"
	"github.com/cometbft/cometbft/types"
	"github.com/cometbft/cometbft/version"
)

// cometbftModule is the module that provides the packages above, as the
// binary's build info lists it.
const cometbftModule = "github.com/cometbft/cometbft"

type (
	privateKey       = crypto.PrivKey
	secretConnection = conn.SecretConnection
	nodeID           = p2p.ID
	nodeInfo         = p2p.DefaultNodeInfo
	nodeInfoOther    = p2p.DefaultNodeInfoOther
	// The mconn mode (mconn.go): the same API at every line.
	mConnection       = conn.MConnection
	channelDescriptor = conn.ChannelDescriptor
)

var (
	makeSecretConnection = conn.MakeSecretConnection
	loadNodeKey          = p2p.LoadNodeKey
	loadOrGenNodeKey     = p2p.LoadOrGenNodeKey
	pubKeyToID           = p2p.PubKeyToID
	maxNodeInfoSize      = p2p.MaxNodeInfoSize
	nodeInfoFromProto    = p2p.DefaultNodeInfoFromToProto
	newDelimitedWriter   = protoio.NewDelimitedWriter
	newDelimitedReader   = protoio.NewDelimitedReader
	marshalDelimited     = protoio.MarshalDelimited
	// CometBFT's sign bytes (signbytes mode); VoteExtensionSignBytes is in
	// signbytes_ext.go, from v0.38.
	voteSignBytes     = viaJSON(types.VoteSignBytes)
	proposalSignBytes = viaJSON(types.ProposalSignBytes)
	// The mconn mode (mconn.go).
	newMConnection     = conn.NewMConnectionWithConfig
	defaultMConnConfig = conn.DefaultMConnConfig
	nopLogger          = log.NewNopLogger
)

// genPrivKey is a fresh Ed25519 node key.
func genPrivKey() privateKey { return ed25519.GenPrivKey() }

// protocolVersion is the ProtocolVersion a node of this release announces
// (its P2P and block protocols; app 0).
func protocolVersion() p2p.ProtocolVersion {
	return p2p.NewProtocolVersion(version.P2PProtocol, version.BlockProtocol, 0)
}
