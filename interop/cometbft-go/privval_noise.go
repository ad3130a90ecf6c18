//go:build cometbft_v040

// noise:// remote signing, CometBFT v0.40's (privval/noise_listener.go):
// the node side is CometBFT's own NoiseListener under a
// SignerListenerEndpoint; the signer side dials TCP and runs go-libp2p's
// Noise transport over it, as CometBFT's noise_listener_test.go does (the
// line ships no noise dialer). privval_nonoise.go is this file at the
// other lines.

package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/cometbft/cometbft/lp2p"
	"github.com/cometbft/cometbft/privval"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pnoise "github.com/libp2p/go-libp2p/p2p/security/noise"
)

const lineHasNoise = true

// noiseListen listens at hostport as a v0.40 node with priv_validator_laddr
// noise://<signer>@hostport does: CometBFT's NoiseListener with the node's
// key, allowing only the signer. It returns the listener and the node's
// libp2p peer ID.
func noiseListen(signer, hostport string, nodeKey privateKey) (net.Listener, string, error) {
	pid, err := peer.Decode(signer)
	if err != nil {
		return nil, "", fmt.Errorf("signer peer ID %q: %w", signer, err)
	}
	ln, err := net.Listen("tcp", hostport)
	if err != nil {
		return nil, "", err
	}
	nl, err := privval.NewNoiseListener(ln, nodeKey, []peer.ID{pid})
	if err != nil {
		_ = ln.Close()
		return nil, "", err
	}
	self, err := lp2p.IDFromPrivateKey(nodeKey)
	if err != nil {
		_ = ln.Close()
		return nil, "", err
	}
	return nl, self.String(), nil
}

// noiseDialer dials hostport and secures the connection with go-libp2p's
// Noise as the identity key, requiring the node to be peer `node`.
func noiseDialer(node, hostport string, key privateKey, timeout time.Duration) (pvSocketDialer, error) {
	pid, err := peer.Decode(node)
	if err != nil {
		return nil, fmt.Errorf("node peer ID %q: %w", node, err)
	}
	lpk, err := lp2p.PrivateKeyFromCosmosKey(key)
	if err != nil {
		return nil, err
	}
	tr, err := libp2pnoise.New(libp2pnoise.ID, lpk, nil)
	if err != nil {
		return nil, err
	}
	return func() (net.Conn, error) {
		raw, err := net.DialTimeout("tcp", hostport, timeout)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		conn, err := tr.SecureOutbound(ctx, raw, pid)
		if err != nil {
			_ = raw.Close()
			return nil, err
		}
		return conn, nil
	}, nil
}

// libp2pID is the libp2p peer ID of a key (`cometbft show-node-id --libp2p`).
func libp2pID(key privateKey) (string, error) {
	id, err := lp2p.IDFromPrivateKey(key)
	if err != nil {
		return "", err
	}
	return id.String(), nil
}
