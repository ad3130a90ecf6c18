//go:build !cometbft_v040

// The lines before and after v0.40 have no noise:// remote signing:
// privval_noise.go is this file at v0.40.

package main

import (
	"net"
	"time"
)

const lineHasNoise = false

func noiseListen(string, string, privateKey) (net.Listener, string, error) {
	return nil, "", errNoNoiseHere
}

func noiseDialer(string, string, privateKey, time.Duration) (func() (net.Conn, error), error) {
	return nil, errNoNoiseHere
}

func libp2pID(privateKey) (string, error) { return "", errNoNoiseHere }
