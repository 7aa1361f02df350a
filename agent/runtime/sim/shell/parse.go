package shell

import (
	"fmt"
)

// The parser turns tokens into a small AST, which compile flattens into
// instructions with jumps so that a Process can stop anywhere (in a sleep)
// and resume later.

type word []part

type redirect struct {
	op     string // ">", ">>", "<", "&>", "&>>"
	fd     int
	dup    bool
	target word
}

type simpleCmd struct {
	assigns []assignment
	args    []word
	redirs  []redirect
	// piped: the output goes into a pipe (to the next command), not to the
	// log.
	piped bool
}

type assignment struct {
	name  string
	value word
}

type node interface{}

type listNode struct{ items []node }

type andOrNode struct {
	first node
	ops   []string // "&&" or "||"
	rest  []node
}

type pipelineNode struct {
	negate bool
	cmds   []node
}

type whileNode struct {
	until      bool
	cond, body *listNode
}

type ifNode struct {
	conds []*listNode // if, elif...
	thens []*listNode
	els   *listNode // nil without else
}

type forNode struct {
	name  string
	words []word
	body  *listNode
}

type parser struct {
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

// isKeyword reports whether the next token is one of the reserved words.
func (p *parser) isKeyword(words ...string) bool {
	lit, ok := p.peek().literal()
	if !ok {
		return false
	}
	for _, w := range words {
		if lit == w {
			return true
		}
	}
	return false
}

func (p *parser) expectKeyword(w string) error {
	if !p.isKeyword(w) {
		return p.errorf("expected %q", w)
	}
	p.next()
	return nil
}

func (p *parser) errorf(format string, args ...any) error {
	t := p.peek()
	what := "end of script"
	switch t.kind {
	case tokWord:
		what = fmt.Sprintf("%q", joinParts(t.parts))
	case tokOp, tokRedir:
		what = fmt.Sprintf("%q", t.op)
	}
	return fmt.Errorf("syntax error at offset %d near %s: %s", t.pos, what, fmt.Sprintf(format, args...))
}

func joinParts(parts []part) string {
	s := ""
	for _, p := range parts {
		s += p.text
	}
	return s
}

// reserved words end a list wherever they appear in command position; the
// construct that expects one consumes it, anything else is a syntax error.
var reserved = []string{"}", "do", "done", "then", "elif", "else", "fi"}

func (p *parser) skipNewlines() {
	for p.peek().kind == tokOp && p.peek().op == "\n" {
		p.next()
	}
}

// parseList parses commands up to EOF, ")" or one of the terminator
// keywords (which it does not consume).
func (p *parser) parseList(terminators ...string) (*listNode, error) {
	l := &listNode{}
	for {
		p.skipNewlines()
		for p.peek().kind == tokOp && (p.peek().op == ";" || p.peek().op == "&") {
			p.next()
			p.skipNewlines()
		}
		t := p.peek()
		if t.kind == tokEOF || (t.kind == tokOp && t.op == ")") || p.isKeyword(terminators...) || p.isKeyword(reserved...) {
			return l, nil
		}
		n, err := p.parseAndOr()
		if err != nil {
			return nil, err
		}
		l.items = append(l.items, n)
		t = p.peek()
		switch {
		case t.kind == tokOp && (t.op == ";" || t.op == "&" || t.op == "\n"):
			p.next()
		case t.kind == tokEOF, t.kind == tokOp && t.op == ")", p.isKeyword(terminators...), p.isKeyword(reserved...):
		default:
			return nil, p.errorf("unexpected token")
		}
	}
}

func (p *parser) parseAndOr() (node, error) {
	first, err := p.parsePipeline()
	if err != nil {
		return nil, err
	}
	n := &andOrNode{first: first}
	for p.peek().kind == tokOp && (p.peek().op == "&&" || p.peek().op == "||") {
		op := p.next().op
		p.skipNewlines()
		next, err := p.parsePipeline()
		if err != nil {
			return nil, err
		}
		n.ops = append(n.ops, op)
		n.rest = append(n.rest, next)
	}
	if len(n.ops) == 0 {
		return first, nil
	}
	return n, nil
}

func (p *parser) parsePipeline() (node, error) {
	pl := &pipelineNode{}
	if p.isKeyword("!") {
		p.next()
		pl.negate = true
	}
	for {
		c, err := p.parseCommand()
		if err != nil {
			return nil, err
		}
		pl.cmds = append(pl.cmds, c)
		if p.peek().kind == tokOp && p.peek().op == "|" {
			p.next()
			p.skipNewlines()
			continue
		}
		break
	}
	if !pl.negate && len(pl.cmds) == 1 {
		return pl.cmds[0], nil
	}
	for _, c := range pl.cmds[:len(pl.cmds)-1] {
		if s, ok := c.(*simpleCmd); ok {
			s.piped = true
		}
	}
	return pl, nil
}

func (p *parser) parseCommand() (node, error) {
	switch {
	case p.isKeyword("while", "until"):
		until := p.next().parts[0].text == "until"
		cond, err := p.parseList("do")
		if err != nil {
			return nil, err
		}
		if err := p.expectKeyword("do"); err != nil {
			return nil, err
		}
		body, err := p.parseList("done")
		if err != nil {
			return nil, err
		}
		if err := p.expectKeyword("done"); err != nil {
			return nil, err
		}
		return &whileNode{until: until, cond: cond, body: body}, nil
	case p.isKeyword("if"):
		p.next()
		n := &ifNode{}
		for {
			cond, err := p.parseList("then")
			if err != nil {
				return nil, err
			}
			if err := p.expectKeyword("then"); err != nil {
				return nil, err
			}
			body, err := p.parseList("elif", "else", "fi")
			if err != nil {
				return nil, err
			}
			n.conds, n.thens = append(n.conds, cond), append(n.thens, body)
			if p.isKeyword("elif") {
				p.next()
				continue
			}
			break
		}
		if p.isKeyword("else") {
			p.next()
			els, err := p.parseList("fi")
			if err != nil {
				return nil, err
			}
			n.els = els
		}
		if err := p.expectKeyword("fi"); err != nil {
			return nil, err
		}
		return n, nil
	case p.isKeyword("for"):
		p.next()
		name, ok := p.next().literal()
		if !ok || !isName(name) {
			return nil, p.errorf("bad for loop variable")
		}
		n := &forNode{name: name}
		p.skipNewlines()
		if p.isKeyword("in") {
			p.next()
			for p.peek().kind == tokWord {
				n.words = append(n.words, word(p.next().parts))
			}
		}
		if t := p.peek(); t.kind == tokOp && (t.op == ";" || t.op == "\n") {
			p.next()
		}
		p.skipNewlines()
		if err := p.expectKeyword("do"); err != nil {
			return nil, err
		}
		body, err := p.parseList("done")
		if err != nil {
			return nil, err
		}
		if err := p.expectKeyword("done"); err != nil {
			return nil, err
		}
		n.body = body
		return n, nil
	case p.isKeyword("{"):
		p.next()
		l, err := p.parseList()
		if err != nil {
			return nil, err
		}
		if err := p.expectKeyword("}"); err != nil {
			return nil, err
		}
		return l, nil
	case p.peek().kind == tokOp && p.peek().op == "(":
		p.next()
		l, err := p.parseList()
		if err != nil {
			return nil, err
		}
		if t := p.next(); t.kind != tokOp || t.op != ")" {
			return nil, p.errorf(`expected ")"`)
		}
		return l, nil
	}
	return p.parseSimple()
}

func (p *parser) parseSimple() (node, error) {
	c := &simpleCmd{}
	for {
		t := p.peek()
		switch t.kind {
		case tokWord:
			p.next()
			if len(c.args) == 0 {
				if a, ok := asAssignment(t.parts); ok {
					c.assigns = append(c.assigns, a)
					continue
				}
			}
			c.args = append(c.args, word(t.parts))
			continue
		case tokRedir:
			p.next()
			r := redirect{op: t.op, fd: t.fd, dup: t.dup}
			if !t.dup {
				target := p.next()
				if target.kind != tokWord {
					return nil, p.errorf("missing redirection target")
				}
				r.target = word(target.parts)
			}
			c.redirs = append(c.redirs, r)
			continue
		}
		break
	}
	if len(c.args) == 0 && len(c.assigns) == 0 {
		return nil, p.errorf("missing command")
	}
	return c, nil
}

// asAssignment recognises NAME=value words.
func asAssignment(parts []part) (assignment, bool) {
	if len(parts) == 0 || parts[0].quote != 0 {
		return assignment{}, false
	}
	first := parts[0].text
	eq := -1
	for i := 0; i < len(first); i++ {
		if first[i] == '=' {
			eq = i
			break
		}
	}
	if eq <= 0 || !isName(first[:eq]) {
		return assignment{}, false
	}
	value := append(word{{text: first[eq+1:]}}, parts[1:]...)
	return assignment{name: first[:eq], value: value}, true
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// parse parses a whole script.
func parse(src string) (*listNode, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	l, err := p.parseList()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, p.errorf("unexpected token")
	}
	return l, nil
}
