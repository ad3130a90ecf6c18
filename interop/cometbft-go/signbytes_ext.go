//go:build !cometbft_v034 && !cometbft_v037

// Vote extensions, from v0.38: VoteExtensionSignBytes (signbytes mode), and
// the Vote's extension fields for the remote-signer modes. v0.34.x and
// v0.37.x have none: signbytes_noext.go.

package main

import "github.com/cometbft/cometbft/types"

var voteExtensionSignBytes = viaJSON(types.VoteExtensionSignBytes)

// lineHasExtensions: a signer signs a non-nil precommit's extension.
const lineHasExtensions = true

var pvExtensionSignBytes = types.VoteExtensionSignBytes

func voteExtension(v *pvVote) (extension, signature []byte) {
	return v.Extension, v.ExtensionSignature
}

func setVoteExtension(v *pvVote, extension []byte) { v.Extension = extension }
