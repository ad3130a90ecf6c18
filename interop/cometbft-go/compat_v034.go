//go:build cometbft_v034

// cometbft.go for CometBFT v0.34.x (build with -tags cometbft_v034): its
// module is github.com/tendermint/tendermint, which go.v0.34.mod replaces
// with github.com/cometbft/cometbft v0.34.35, as chains do, so its packages
// keep Tendermint's import paths. Below the imports this file is
// cometbft.go's text; keep the two alike.

package main

import (
	"github.com/tendermint/tendermint/crypto"
	"github.com/tendermint/tendermint/crypto/ed25519"
	"github.com/tendermint/tendermint/libs/log"
	"github.com/tendermint/tendermint/libs/protoio"
	"github.com/tendermint/tendermint/p2p"
	"github.com/tendermint/tendermint/p2p/conn"
	"github.com/tendermint/tendermint/types"
	"github.com/tendermint/tendermint/version"
)

// cometbftModule is the module that provides the packages above, as the
// binary's build info lists it (with the replacement's version).
const cometbftModule = "github.com/tendermint/tendermint"

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
