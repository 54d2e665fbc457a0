// Command fluxcel evaluates Flux health-check expressions (Kustomization spec.healthCheckExprs) over
// objects, the way Flux's kustomize-controller does: the same CEL environment options, expressions
// parsed (not compiled, every variable dynamic), status.observedGeneration compared with
// metadata.generation first, then inProgress, failed and current in that order, InProgress when none
// holds. Used by tests/shipping/test_flux_health.py; reads JSON on stdin:
//
//	{"exprs": {"current": "...", "failed": "...", "inProgress": "..."}, "objects": [{...}, ...]}
//
// and prints one result per object: "Current", "Failed", "InProgress" or "error: <message>".
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
)

type input struct {
	Exprs   map[string]string `json:"exprs"`
	Objects []map[string]any  `json:"objects"`
}

func program(expr string) (cel.Program, error) {
	env, err := cel.NewEnv(
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		ext.Strings(),
		ext.Sets(),
		ext.Encoders(),
	)
	if err != nil {
		return nil, err
	}
	ast, issues := env.Parse(expr)
	if issues != nil && issues.Err() != nil {
		return nil, issues.Err()
	}
	return env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.InterruptCheckFrequency(100))
}

func nestedInt(obj map[string]any, outer, inner string) (float64, bool) {
	m, ok := obj[outer].(map[string]any)
	if !ok {
		return 0, false
	}
	v, ok := m[inner].(float64)
	return v, ok
}

func evaluate(progs map[string]cel.Program, obj map[string]any) string {
	if observed, ok := nestedInt(obj, "status", "observedGeneration"); ok {
		if generation, ok := nestedInt(obj, "metadata", "generation"); ok && observed != generation {
			return "InProgress"
		}
	}
	for _, step := range []struct{ key, status string }{
		{"inProgress", "InProgress"}, {"failed", "Failed"}, {"current", "Current"},
	} {
		prog, ok := progs[step.key]
		if !ok {
			continue
		}
		val, _, err := prog.ContextEval(context.Background(), obj)
		if err != nil {
			return "error: " + err.Error()
		}
		b, ok := val.(types.Bool)
		if !ok {
			return fmt.Sprintf("error: %s is not a boolean", step.key)
		}
		if bool(b) {
			return step.status
		}
	}
	return "InProgress"
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "fluxcel:", err)
		os.Exit(2)
	}
	progs := map[string]cel.Program{}
	for key, expr := range in.Exprs {
		if expr == "" {
			continue
		}
		p, err := program(expr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fluxcel: %s: %v\n", key, err)
			os.Exit(2)
		}
		progs[key] = p
	}
	out := make([]string, 0, len(in.Objects))
	for _, obj := range in.Objects {
		out = append(out, evaluate(progs, obj))
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(2)
	}
}
