package shell

import (
	"fmt"
	"strings"
)

type tokenKind int

const (
	tokWord  tokenKind = iota
	tokOp              // ; & && || | ( ) and newline ("\n")
	tokRedir           // > >> < with an optional fd, and the fd duplications 2>&1, >&2
	tokEOF
)

// part is a piece of a word with its quoting: unquoted and double-quoted
// parts expand $VAR, single-quoted parts are literal.
type part struct {
	text  string
	quote byte // 0, '\'' or '"'
}

type token struct {
	kind  tokenKind
	op    string // tokOp, tokRedir
	parts []part // tokWord
	fd    int    // tokRedir: 1 (stdout), 2 (stderr), 0 (stdin)
	dup   bool   // tokRedir: ">&N" (duplication, no file)
	pos   int
}

// literal is the word's text when it is a plain unquoted word (keywords are
// recognised only then).
func (t token) literal() (string, bool) {
	if t.kind != tokWord || len(t.parts) != 1 || t.parts[0].quote != 0 {
		return "", false
	}
	return t.parts[0].text, true
}

// lex splits a script into tokens the way sh does for the subset the
// interpreter runs: quotes, backslash escapes, comments, operators and
// redirections.
func lex(src string) ([]token, error) {
	var (
		toks  []token
		parts []part
		cur   strings.Builder
		start = -1
	)
	flushPart := func(quote byte) {
		if cur.Len() > 0 || quote != 0 {
			parts = append(parts, part{text: cur.String(), quote: quote})
		}
		cur.Reset()
	}
	flushWord := func() {
		flushPart(0)
		if len(parts) > 0 {
			toks = append(toks, token{kind: tokWord, parts: parts, pos: start})
		}
		parts, start = nil, -1
	}
	mark := func(i int) {
		if start < 0 {
			start = i
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '\\':
			mark(i)
			if i+1 < len(src) {
				if src[i+1] == '\n' { // line continuation
					i++
					continue
				}
				if src[i+1] == '$' {
					cur.WriteString("\x00$") // escaped: not expanded
				} else {
					cur.WriteByte(src[i+1])
				}
				i++
			}
		case c == '\'':
			mark(i)
			flushPart(0)
			end := strings.IndexByte(src[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("unterminated quoted string at %d", i)
			}
			cur.WriteString(src[i+1 : i+1+end])
			flushPart('\'')
			i += end + 1
		case c == '"':
			mark(i)
			flushPart(0)
			j := i + 1
			for ; j < len(src) && src[j] != '"'; j++ {
				if src[j] == '\\' && j+1 < len(src) && strings.IndexByte("\\\"$`\n", src[j+1]) >= 0 {
					j++
					if src[j] != '\n' {
						if src[j] == '$' {
							cur.WriteString("\x00$") // escaped: not expanded
						} else {
							cur.WriteByte(src[j])
						}
					}
					continue
				}
				cur.WriteByte(src[j])
			}
			if j >= len(src) {
				return nil, fmt.Errorf("unterminated quoted string at %d", i)
			}
			flushPart('"')
			i = j
		case c == '#' && start < 0:
			for i < len(src) && src[i] != '\n' {
				i++
			}
			i-- // the newline is a token
		case c == ' ' || c == '\t' || c == '\r':
			flushWord()
		case c == '\n' || c == ';' || c == '&' || c == '|' || c == '(' || c == ')':
			// "&>" redirects both streams.
			if c == '&' && i+1 < len(src) && src[i+1] == '>' {
				flushWord()
				op := "&>"
				i++
				if i+1 < len(src) && src[i+1] == '>' {
					op, i = "&>>", i+1
				}
				toks = append(toks, token{kind: tokRedir, op: op, fd: 1, pos: i})
				continue
			}
			flushWord()
			op := string(c)
			if i+1 < len(src) && (c == '&' || c == '|' || c == ';') && src[i+1] == c {
				op += string(c)
				i++
			}
			toks = append(toks, token{kind: tokOp, op: op, pos: i})
		case c == '>' || c == '<':
			fd := 1
			if c == '<' {
				fd = 0
			}
			// A word made of one digit right before the operator is its fd.
			if len(parts) == 0 && (cur.String() == "1" || cur.String() == "2" || cur.String() == "0") {
				fd = int(cur.String()[0] - '0')
				cur.Reset()
				start = -1
			} else {
				flushWord()
			}
			op := string(c)
			if c == '>' && i+1 < len(src) && src[i+1] == '>' {
				op = ">>"
				i++
			}
			tok := token{kind: tokRedir, op: op, fd: fd, pos: i}
			if i+1 < len(src) && src[i+1] == '&' {
				// >&2, 2>&1: a duplication; the target fd follows.
				i += 2
				for i < len(src) && (src[i] >= '0' && src[i] <= '9' || src[i] == '-') {
					i++
				}
				i--
				tok.dup = true
			}
			toks = append(toks, tok)
		default:
			mark(i)
			cur.WriteByte(c)
		}
	}
	flushWord()
	toks = append(toks, token{kind: tokEOF, pos: len(src)})
	return toks, nil
}
