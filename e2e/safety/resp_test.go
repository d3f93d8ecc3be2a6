package safety

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/lockgate/lockgate/lua"
)

// errNotRESP says a stream holds something else than RESP values: the
// proxy then copies the rest of that connection as it comes.
var errNotRESP = errors.New("not RESP")

// readRESP reads one whole RESP value (RESP2 or RESP3; on the way to Redis
// also an inline command, one line) from r and returns its bytes as they
// came. The proxy needs value boundaries only, to count commands and
// replies: it decodes nothing but lengths.
func readRESP(r *bufio.Reader, toRedis bool) ([]byte, error) {
	var buf bytes.Buffer
	err := readValue(r, &buf, toRedis)
	return buf.Bytes(), err
}

func readValue(r *bufio.Reader, buf *bytes.Buffer, toRedis bool) error {
	line, err := r.ReadSlice('\n')
	buf.Write(line)
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return errNotRESP
		}
		return err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return errNotRESP
	}
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(': // one line
		return nil
	case '$', '!', '=': // a length, then that many bytes and CRLF
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return errNotRESP
		}
		if n < 0 { // a null bulk string
			return nil
		}
		if _, err := io.CopyN(buf, r, int64(n)+2); err != nil {
			return err
		}
		return nil
	case '*', '~', '>', '%', '|': // a count, then that many values (pairs for maps)
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return errNotRESP
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range max(n, 0) {
			if err := readValue(r, buf, toRedis); err != nil {
				return err
			}
		}
		return nil
	}
	if toRedis { // an inline command
		return nil
	}
	return errNotRESP
}

// commandArgs splits a command as clients send it (an array of bulk
// strings) into its arguments; nil for anything else.
func commandArgs(v []byte) [][]byte {
	r := bufio.NewReader(bytes.NewReader(v))
	line, err := r.ReadSlice('\n')
	if err != nil || len(line) < 4 || line[0] != '*' {
		return nil
	}
	n, err := strconv.Atoi(string(line[1 : len(line)-2]))
	if err != nil {
		return nil
	}
	args := make([][]byte, 0, n)
	for range n {
		line, err := r.ReadSlice('\n')
		if err != nil || len(line) < 4 || line[0] != '$' {
			return nil
		}
		size, err := strconv.Atoi(string(line[1 : len(line)-2]))
		if err != nil || size < 0 {
			return nil
		}
		a := make([]byte, size+2)
		if _, err := io.ReadFull(r, a); err != nil {
			return nil
		}
		args = append(args, a[:size])
	}
	return args
}

// matcher says whether a command the gateway sends (its arguments, the
// name first) is one a fault is for.
type matcher func(args [][]byte) bool

// scriptCall matches the calls of the script called name (FCALL of its
// function, EVALSHA with its SHA-1, EVAL with its source, and their _RO
// forms) with a key or argument
// that contains mention, such as a lock's hash tag "{ns/name}"; "" matches
// every call of the script.
func scriptCall(name string, mention string) matcher {
	s, ok := lua.Named(name)
	if !ok {
		panic("no script " + name)
	}
	sum := sha1.Sum([]byte(s.Source))
	sha := hex.EncodeToString(sum[:])
	return func(args [][]byte) bool {
		if len(args) < 3 {
			return false
		}
		switch strings.ToUpper(string(args[0])) {
		case "FCALL", "FCALL_RO":
			if string(args[1]) != s.Function {
				return false
			}
		case "EVALSHA", "EVALSHA_RO":
			if string(args[1]) != sha {
				return false
			}
		case "EVAL", "EVAL_RO":
			sum := sha1.Sum(args[1])
			if hex.EncodeToString(sum[:]) != sha {
				return false
			}
		default:
			return false
		}
		if mention == "" {
			return true
		}
		for _, a := range args[3:] {
			if bytes.Contains(a, []byte(mention)) {
				return true
			}
		}
		return false
	}
}

// hashTag is the hash tag of a lock's or a semaphore's keys: "{ns/name}".
func hashTag(lock string) string { return fmt.Sprintf("{%s}", lock) }
