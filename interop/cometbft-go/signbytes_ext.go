//go:build !cometbft_v034 && !cometbft_v037

// VoteExtensionSignBytes, from v0.38 (signbytes mode). v0.34.x and v0.37.x
// have none: signbytes_noext.go.

package main

import "github.com/cometbft/cometbft/types"

var voteExtensionSignBytes = viaJSON(types.VoteExtensionSignBytes)
