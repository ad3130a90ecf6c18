// The listen and dial modes: one SecretConnection, accepted or dialed,
// then optionally the NodeInfo exchange of p2p/transport.go, then stdin
// written to the connection and what arrives on it copied to stdout.

package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

func pipe(mode string, args []string) error {
	fs := flag.NewFlagSet(mode, flag.ContinueOnError)
	keyPath := fs.String("key", "", "node_key.json to use (default: a fresh key)")
	chunk := fs.Int("chunk", 65536, "bytes per SecretConnection.Write call")
	peerID := fs.String("peer-id", "", "fail unless the peer's node ID is this")
	withNodeInfo := fs.Bool("nodeinfo", false, "exchange NodeInfo after the handshake")
	network := fs.String("network", "cometbft-peer-net", "network to announce (-nodeinfo)")
	channels := fs.String("channels", "", "channels to announce, hex (-nodeinfo)")
	moniker := fs.String("moniker", "cometbft-peer", "moniker to announce (-nodeinfo)")
	addr, err := onePositional(fs, args, "ADDR")
	if err != nil {
		return err
	}
	if *chunk < 1 {
		return errors.New("-chunk must be at least 1")
	}
	tcp, sc, key, err := openSecret(mode, addr, *keyPath)
	if err != nil {
		return err
	}
	defer tcp.Close()
	remote := pubKeyToID(sc.RemotePubKey())
	fmt.Fprintf(os.Stderr, "peer %s\n", remote)
	if *peerID != "" && string(remote) != *peerID {
		return fmt.Errorf("peer is %s, expected %s", remote, *peerID)
	}
	if *withNodeInfo {
		chs, err := hex.DecodeString(*channels)
		if err != nil {
			return fmt.Errorf("-channels: %w", err)
		}
		ours := nodeInfo{
			ProtocolVersion: protocolVersion(),
			DefaultNodeID:   pubKeyToID(key.PubKey()),
			ListenAddr:      tcp.LocalAddr().String(),
			Network:         *network,
			Version:         strings.TrimPrefix(cometbftVersion(), "v"),
			Channels:        chs,
			Moniker:         *moniker,
			Other:           nodeInfoOther{TxIndex: "off"},
		}
		if err := exchangeNodeInfo(sc, remote, ours); err != nil {
			return err
		}
	}

	sent := make(chan error, 1)
	go func() {
		buf := make([]byte, *chunk)
		for {
			n, err := io.ReadFull(os.Stdin, buf)
			if n > 0 {
				if _, werr := sc.Write(buf[:n]); werr != nil {
					sent <- werr
					return
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				sent <- tcp.CloseWrite()
				return
			}
			if err != nil {
				sent <- err
				return
			}
		}
	}()

	out := bufio.NewWriterSize(os.Stdout, 1<<16)
	buf := make([]byte, 1<<16)
	for {
		n, err := sc.Read(buf)
		if n > 0 {
			if _, werr := out.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if err := <-sent; err != nil {
		return fmt.Errorf("sending: %w", err)
	}
	return nil
}

// exchangeNodeInfo is p2p/transport.go's handshake() and the checks of its
// upgrade(), with the peer's NodeInfo and the results printed on stderr.
func exchangeNodeInfo(sc *secretConnection, remote nodeID, ours nodeInfo) error {
	if err := sc.SetDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return err
	}
	var raw bytes.Buffer
	pb := nodeInfo{}.ToProto()
	errc := make(chan error, 2)
	go func() {
		_, err := newDelimitedWriter(sc).WriteMsg(ours.ToProto())
		errc <- err
	}()
	go func() {
		// protoio reads the varint a byte at a time and then exactly the
		// message, so the tee sees the message and nothing after it.
		r := newDelimitedReader(io.TeeReader(sc, &raw), maxNodeInfoSize())
		_, err := r.ReadMsg(pb)
		errc <- err
	}()
	for i := 0; i < cap(errc); i++ {
		if err := <-errc; err != nil {
			return fmt.Errorf("nodeinfo exchange: %w", err)
		}
	}
	if err := sc.SetDeadline(time.Time{}); err != nil {
		return err
	}
	theirs, err := nodeInfoFromProto(pb)
	if err != nil {
		return err
	}
	reencoded, err := marshalDelimited(theirs.ToProto())
	if err != nil {
		return err
	}
	errText := func(err error) string {
		if err == nil {
			return ""
		}
		return err.Error()
	}
	idErr := ""
	if theirs.ID() != remote {
		idErr = fmt.Sprintf("conn.ID (%v) NodeInfo.ID (%v) mismatch", remote, theirs.ID())
	}
	report := map[string]any{
		"id":          string(theirs.DefaultNodeID),
		"listen_addr": theirs.ListenAddr,
		"network":     theirs.Network,
		"version":     theirs.Version,
		"channels":    hex.EncodeToString(theirs.Channels),
		"moniker":     theirs.Moniker,
		"tx_index":    theirs.Other.TxIndex,
		"rpc_address": theirs.Other.RPCAddress,
		"p2p":         theirs.ProtocolVersion.P2P,
		"block":       theirs.ProtocolVersion.Block,
		"app":         theirs.ProtocolVersion.App,
		"validate":    errText(theirs.Validate()),
		"id_check":    idErr,
		"compatible":  errText(ours.CompatibleWith(theirs)),
		"received":    hex.EncodeToString(raw.Bytes()),
		"reencoded":   hex.EncodeToString(reencoded),
	}
	line, err := json.Marshal(report)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "nodeinfo %s\n", line)
	for _, e := range []string{report["validate"].(string), idErr, report["compatible"].(string)} {
		if e != "" {
			return fmt.Errorf("peer's NodeInfo refused: %s", e)
		}
	}
	return nil
}
