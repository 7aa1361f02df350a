package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/ext"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// perCallCostLimit bounds one expression's evaluation, as kube's
// PerCallLimit does.
const perCallCostLimit = 1000000

// celEnv is the environment of matchConditions: kube's variables object,
// oldObject and request (authorizer is not offered: corekube has no
// authorizer to ask yet), all dynamically typed, with the strings
// extension library.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType),
		cel.Variable("request", cel.DynType),
		ext.Strings(),
	)
})

// condition is one compiled matchCondition.
type condition struct {
	name, expression string
	program          cel.Program
}

// CompileCondition compiles a matchCondition expression; its error is the
// reason the registry reports ("compilation failed: ...").
func CompileCondition(expression string) (cel.Program, error) {
	env, err := celEnv()
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expression)
	if iss.Err() != nil {
		return nil, fmt.Errorf("compilation failed: %v", iss.Err())
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("must evaluate to bool")
	}
	return env.Program(ast, cel.CostLimit(perCallCostLimit))
}

func compileConditions(mcs []admissionregistrationv1.MatchCondition) ([]condition, error) {
	out := make([]condition, 0, len(mcs))
	for _, mc := range mcs {
		p, err := CompileCondition(mc.Expression)
		if err != nil {
			return nil, fmt.Errorf("matchCondition %q: %w", mc.Name, err)
		}
		out = append(out, condition{name: mc.Name, expression: mc.Expression, program: p})
	}
	return out, nil
}

// evalConditions is kube's matchConditions matcher: any condition false
// skips the webhook; all true calls it; otherwise an error (that the
// failure policy judges).
func evalConditions(conds []condition, rev *admissionv1.AdmissionReview) (bool, error) {
	vars, err := celVariables(rev.Request)
	if err != nil {
		return false, err
	}
	var errs []error
	for _, c := range conds {
		val, _, err := c.program.Eval(vars)
		if err != nil {
			errs = append(errs, fmt.Errorf("expression '%s' resulted in error: %w", c.name, err))
			continue
		}
		b, ok := val.Value().(bool)
		if !ok {
			errs = append(errs, fmt.Errorf("expression '%s' did not evaluate to bool", c.name))
			continue
		}
		if !b {
			return false, nil
		}
	}
	return len(errs) == 0, errors.Join(errs...)
}

// celVariables are the request's object, oldObject (null when absent) and
// the rest of the AdmissionRequest, as JSON values with integral numbers
// as ints (CEL compares 1 and 1.0 apart in some places).
func celVariables(req *admissionv1.AdmissionRequest) (map[string]any, error) {
	obj, err := jsonValue(req.Object.Raw)
	if err != nil {
		return nil, err
	}
	old, err := jsonValue(req.OldObject.Raw)
	if err != nil {
		return nil, err
	}
	r := *req
	r.Object.Raw, r.OldObject.Raw = nil, nil
	data, err := json.Marshal(&r)
	if err != nil {
		return nil, err
	}
	request, err := jsonValue(data)
	if err != nil {
		return nil, err
	}
	return map[string]any{"object": obj, "oldObject": old, "request": request}, nil
}

func jsonValue(data []byte) (any, error) {
	if len(data) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if !strings.ContainsAny(string(x), ".eE") {
			if i, err := x.Int64(); err == nil {
				return i
			}
		}
		f, _ := x.Float64()
		return f
	}
	return v
}
