//go:build !cometbft_v034 && !cometbft_v1

// The privval Message of v0.37.x to v0.40.x (privval-reencode mode):
// package tendermint.privval. v1.0.1's is in privval_v1.go. The proto
// package is imported, not privval itself, whose v0.40.0 listener brings
// in libp2p.

package main

import pvproto "github.com/cometbft/cometbft/proto/tendermint/privval"

var privvalReencode = reencodeOf[pvproto.Message]()
