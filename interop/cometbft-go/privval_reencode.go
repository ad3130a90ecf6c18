// The privval-reencode mode: privval Message bodies decoded and encoded
// again with the line's generated type (privval_v034.go, privval_v0.go,
// privval_v1.go).

package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
)

// reencodeOf returns a function that decodes a body as M and encodes it
// again (M is the line's privval Message: privval_v034.go, privval_v0.go,
// privval_v1.go).
func reencodeOf[M any, P gogoMessage[M]]() func([]byte) ([]byte, error) {
	return func(body []byte) ([]byte, error) {
		var m M
		if err := P(&m).Unmarshal(body); err != nil {
			return nil, err
		}
		return P(&m).Marshal()
	}
}

// privvalReencodeLines is the privval-reencode subcommand.
func privvalReencodeLines(in io.Reader, out io.Writer) error {
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 0, 1<<20), 16<<20)
	w := bufio.NewWriter(out)
	for scanner.Scan() {
		body, err := hex.DecodeString(strings.TrimSpace(scanner.Text()))
		if err != nil {
			return fmt.Errorf("privval-reencode: %w", err)
		}
		again, err := privvalReencode(body)
		if err != nil {
			fmt.Fprintln(w, "error:", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Fprintln(w, hex.EncodeToString(again))
	}
	if err := scanner.Err(); err != nil {
		return fmt.Errorf("privval-reencode: %w", err)
	}
	return w.Flush()
}
