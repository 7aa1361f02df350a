// Package tokenfile is kube-apiserver's --token-auth-file: static bearer
// tokens read once at start-up from a CSV file of
//
//	token,user,uid,"group1,group2"
//
// parsed as kube parses it (encoding/csv, so quoting works and blank lines
// are skipped; at least three columns, the groups column optional; no
// comment syntax, so a "#..." line is a record like any other; a record
// with an empty token is skipped; a repeated token keeps its last record).
package tokenfile

import (
	"context"
	"crypto/sha256"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/corekube/corekube/auth/authenticator"
	"github.com/corekube/corekube/auth/user"
)

// Authenticator authenticates the tokens of a token file.
type Authenticator struct {
	// tokens is keyed by the SHA-256 of each token, not the token: a map
	// lookup compares keys byte by byte and returns early, and comparing
	// digests leaks nothing useful about the token itself, so lookups are
	// as good as constant-time comparisons without a scan of every entry.
	tokens map[[sha256.Size]byte]*user.Info
}

// NewCSV reads the token file at path. log (nil: slog.Default()) gets
// kube's warnings about empty and repeated tokens, by record number only.
func NewCSV(path string, log *slog.Logger) (*Authenticator, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	a, err := Parse(f, log)
	if err != nil {
		return nil, fmt.Errorf("token file %q: %w", path, err)
	}
	return a, nil
}

// Parse reads token file records from r.
func Parse(r io.Reader, log *slog.Logger) (*Authenticator, error) {
	if log == nil {
		log = slog.Default()
	}
	reader := csv.NewReader(r)
	// Records have three or four columns; more are ignored, as kube does.
	reader.FieldsPerRecord = -1
	tokens := map[[sha256.Size]byte]*user.Info{}
	for n := 1; ; n++ {
		record, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			// csv.ParseError names the line and column, never the text.
			return nil, err
		}
		if len(record) < 3 {
			line, _ := reader.FieldPos(0)
			return nil, fmt.Errorf("line %d: must have at least 3 columns (token, user name, user uid), found %d", line, len(record))
		}
		if record[0] == "" {
			log.Warn("empty token in the token file, record skipped", "record", n)
			continue
		}
		key := sha256.Sum256([]byte(record[0]))
		if _, dup := tokens[key]; dup {
			log.Warn("duplicate token in the token file, the last record wins", "record", n)
		}
		u := &user.Info{Name: record[1], UID: record[2]}
		if len(record) >= 4 {
			// As kube: the column split on commas, empty names included.
			u.Groups = strings.Split(record[3], ",")
		}
		tokens[key] = u
	}
	return &Authenticator{tokens: tokens}, nil
}

// AuthenticateToken authenticates a token of the file; any other token is
// not this authenticator's kind.
func (a *Authenticator) AuthenticateToken(_ context.Context, token string) (*authenticator.Response, bool, error) {
	u, ok := a.tokens[sha256.Sum256([]byte(token))]
	if !ok {
		return nil, false, nil
	}
	return &authenticator.Response{User: u}, true, nil
}

// Len is how many tokens the file holds.
func (a *Authenticator) Len() int { return len(a.tokens) }
