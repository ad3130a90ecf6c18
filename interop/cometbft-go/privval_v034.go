//go:build cometbft_v034

// The privval Message of v0.34.x (privval-reencode mode), at Tendermint's
// import path.

package main

import pvproto "github.com/tendermint/tendermint/proto/tendermint/privval"

var privvalReencode = reencodeOf[pvproto.Message]()
