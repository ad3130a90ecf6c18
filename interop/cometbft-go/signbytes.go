// The signbytes mode: CometBFT's sign bytes of votes, proposals and vote
// extensions, through the line's functions (cometbft.go or compat_v034.go;
// signbytes_ext.go or signbytes_noext.go).

package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"time"
)

// signBytesFunc is one of CometBFT's sign-bytes functions, taking its
// message as JSON and its timestamp apart (encoding/json cannot set
// time.Time from seconds and nanos).
type signBytesFunc func(chainID string, msg json.RawMessage, ts time.Time) ([]byte, error)

// viaJSON adapts f (types.VoteSignBytes and the like, whose message type
// differs between the lines' proto packages) to a signBytesFunc. A panic
// in f (CometBFT panics on an invalid block ID) is returned as an error.
func viaJSON[M any](f func(string, *M) []byte) signBytesFunc {
	return func(chainID string, raw json.RawMessage, ts time.Time) (out []byte, err error) {
		m := new(M)
		if err := json.Unmarshal(raw, m); err != nil {
			return nil, err
		}
		field := reflect.ValueOf(m).Elem().FieldByName("Timestamp")
		if !field.IsValid() || field.Type() != reflect.TypeOf(ts) {
			return nil, fmt.Errorf("%T has no time.Time Timestamp", m)
		}
		field.Set(reflect.ValueOf(ts))
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return f(chainID, m), nil
	}
}

// signBytes is the signbytes subcommand.
func signBytes(in io.Reader, out io.Writer) error {
	type request struct {
		Kind    string          `json:"kind"`
		ChainID string          `json:"chain_id"`
		Msg     json.RawMessage `json:"msg"`
		Seconds int64           `json:"seconds"`
		Nanos   int64           `json:"nanos"`
	}
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 0, 1<<20), 16<<20)
	w := bufio.NewWriter(out)
	for scanner.Scan() {
		var req request
		if err := json.Unmarshal(scanner.Bytes(), &req); err != nil {
			return fmt.Errorf("signbytes: %w", err)
		}
		var f signBytesFunc
		switch req.Kind {
		case "vote":
			f = voteSignBytes
		case "proposal":
			f = proposalSignBytes
		case "extension":
			f = voteExtensionSignBytes
		default:
			return fmt.Errorf("signbytes: unknown kind %q", req.Kind)
		}
		if f == nil {
			fmt.Fprintln(w, "unsupported")
			continue
		}
		bz, err := f(req.ChainID, req.Msg, time.Unix(req.Seconds, req.Nanos).UTC())
		if err != nil {
			fmt.Fprintln(w, "error:", strings.ReplaceAll(err.Error(), "\n", " "))
			continue
		}
		fmt.Fprintln(w, hex.EncodeToString(bz))
	}
	if err := scanner.Err(); err != nil {
		return fmt.Errorf("signbytes: %w", err)
	}
	return w.Flush()
}
