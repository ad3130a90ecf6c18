//go:build cometbft_v1

// The privval Message of v1.0.1 (privval-reencode mode): package
// cometbft.privval.v1, in the api module.

package main

import pvproto "github.com/cometbft/cometbft/api/cometbft/privval/v1"

var privvalReencode = reencodeOf[pvproto.Message]()
