package shell

type opcode uint8

const (
	opExec      opcode = iota // run cmd
	opJump                    // goto target
	opJumpIfOK                // goto target when $? == 0
	opJumpIfErr               // goto target when $? != 0
	opNot                     // $? = !$?
	opStatus0                 // $? = 0
)

type instr struct {
	op     opcode
	cmd    *simpleCmd
	target int
}

type compiler struct{ code []instr }

func (c *compiler) emit(i instr) int {
	c.code = append(c.code, i)
	return len(c.code) - 1
}

func (c *compiler) here() int { return len(c.code) }

func (c *compiler) patch(at int) { c.code[at].target = c.here() }

func (c *compiler) node(n node) {
	switch n := n.(type) {
	case *listNode:
		for _, item := range n.items {
			c.node(item)
		}
	case *simpleCmd:
		c.emit(instr{op: opExec, cmd: n})
	case *andOrNode:
		c.node(n.first)
		for i, op := range n.ops {
			jump := opJumpIfErr // a && b: skip b when a failed
			if op == "||" {
				jump = opJumpIfOK
			}
			at := c.emit(instr{op: jump})
			c.node(n.rest[i])
			c.patch(at)
		}
	case *pipelineNode:
		for _, cmd := range n.cmds {
			c.node(cmd)
		}
		if n.negate {
			c.emit(instr{op: opNot})
		}
	case *whileNode:
		top := c.here()
		c.node(n.cond)
		exit := opJumpIfErr
		if n.until {
			exit = opJumpIfOK
		}
		at := c.emit(instr{op: exit})
		c.node(n.body)
		c.emit(instr{op: opJump, target: top})
		c.patch(at)
		c.emit(instr{op: opStatus0})
	case *ifNode:
		var ends []int
		for i, cond := range n.conds {
			c.node(cond)
			next := c.emit(instr{op: opJumpIfErr})
			c.node(n.thens[i])
			ends = append(ends, c.emit(instr{op: opJump}))
			c.patch(next)
		}
		if n.els != nil {
			c.node(n.els)
		} else {
			c.emit(instr{op: opStatus0})
		}
		for _, at := range ends {
			c.patch(at)
		}
	case *forNode:
		// The words are known when the script is parsed (no globbing), so
		// the loop is unrolled.
		for _, w := range n.words {
			c.emit(instr{op: opExec, cmd: &simpleCmd{assigns: []assignment{{name: n.name, value: w}}}})
			c.node(n.body)
		}
		if len(n.words) == 0 {
			c.emit(instr{op: opStatus0})
		}
	}
}
