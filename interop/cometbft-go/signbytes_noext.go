//go:build cometbft_v034 || cometbft_v037

// v0.34.x and v0.37.x have no vote extensions to sign: the signbytes mode
// answers "unsupported" for them, and the remote-signer modes check no
// extension signature (signbytes_ext.go has the others').

package main

var voteExtensionSignBytes signBytesFunc

const lineHasExtensions = false

func pvExtensionSignBytes(string, *pvVote) []byte { return nil }

func voteExtension(*pvVote) (extension, signature []byte) { return nil, nil }

func setVoteExtension(*pvVote, []byte) {}
