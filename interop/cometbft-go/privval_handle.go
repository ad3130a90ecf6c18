// The privval-handle mode: privval requests answered by the line's
// DefaultValidationRequestHandler over a MockPV (privval_v034.go,
// privval_v0.go, privval_v1.go).

package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// handleOf returns a function that decodes a body as M (the line's privval
// Message) and answers it with handler over pv, as CometBFT's SignerServer
// does; the outcome is one line of the privval-handle subcommand.
func handleOf[M any, P gogoMessage[M], V any](handler func(V, M, string) (M, error), pv V) func([]byte, string) (string, error) {
	return func(body []byte, chainID string) (outcome string, err error) {
		var m M
		if err := P(&m).Unmarshal(body); err != nil {
			return "undecodable: " + err.Error(), nil
		}
		defer func() {
			if r := recover(); r != nil {
				outcome, err = fmt.Sprintf("panic: %v", r), nil
			}
		}()
		res, herr := handler(pv, m, chainID)
		if herr != nil {
			return "error: " + herr.Error(), nil
		}
		bz, err := P(&res).Marshal()
		if err != nil {
			return "", err
		}
		return "response " + hex.EncodeToString(bz), nil
	}
}

// privvalHandleLines is the privval-handle subcommand.
func privvalHandleLines(in io.Reader, out io.Writer) error {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 0, 1<<20), 16<<20)
	w := bufio.NewWriter(out)
	for scanner.Scan() {
		chainID, text, ok := strings.Cut(strings.TrimSpace(scanner.Text()), " ")
		if !ok {
			return fmt.Errorf("privval-handle: want \"CHAIN HEX\", got %q", scanner.Text())
		}
		body, err := hex.DecodeString(text)
		if err != nil {
			return fmt.Errorf("privval-handle: %w", err)
		}
		outcome, err := privvalHandle(body, chainID)
		if err != nil {
			return fmt.Errorf("privval-handle: %w", err)
		}
		fmt.Fprintln(w, strings.ReplaceAll(outcome, "\n", " "))
	}
	if err := scanner.Err(); err != nil {
		return fmt.Errorf("privval-handle: %w", err)
	}
	return w.Flush()
}
