// Command promrules checks Prometheus rule groups and PromQL expressions with Prometheus' own
// packages, in place of promtool (which the project does not build): rulefmt parses and validates
// rule groups exactly as Prometheus loads a rule file (the spec of a PrometheusRule), and the PromQL
// parser parses each expression and names the metrics it selects. Used by tests/shipping; reads JSON
// on stdin:
//
//	{"groups": "<rule file YAML>", "exprs": ["<PromQL>", ...]}
//
// and prints {"errors": [...], "rules": [{"name": ..., "expr": ..., "metrics": [...]}],
// "exprs": [{"metrics": [...], "error": "..."}]}.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

type input struct {
	Groups string   `json:"groups"`
	Exprs  []string `json:"exprs"`
}

type rule struct {
	Group   string            `json:"group"`
	Name    string            `json:"name"`
	Expr    string            `json:"expr"`
	For     string            `json:"for"`
	Labels  map[string]string `json:"labels"`
	Metrics []string          `json:"metrics"`
}

type expr struct {
	Metrics []string `json:"metrics"`
	Error   string   `json:"error,omitempty"`
}

type output struct {
	Errors []string `json:"errors"`
	Rules  []rule   `json:"rules"`
	Exprs  []expr   `json:"exprs"`
}

// metrics names every metric an expression selects (by __name__ equality).
func metrics(text string) ([]string, error) {
	e, err := parser.ParseExpr(text)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, matchers := range parser.ExtractSelectors(e) {
		for _, m := range matchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				seen[m.Value] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out, nil
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		fmt.Fprintln(os.Stderr, "promrules:", err)
		os.Exit(2)
	}
	out := output{Errors: []string{}, Rules: []rule{}, Exprs: []expr{}}
	if in.Groups != "" {
		groups, errs := rulefmt.Parse([]byte(in.Groups), false, model.UTF8Validation)
		for _, err := range errs {
			out.Errors = append(out.Errors, err.Error())
		}
		if groups != nil {
			for _, g := range groups.Groups {
				for _, r := range g.Rules {
					names, err := metrics(r.Expr)
					if err != nil {
						out.Errors = append(out.Errors, fmt.Sprintf("%s/%s: %v", g.Name, r.Alert, err))
					}
					out.Rules = append(out.Rules, rule{Group: g.Name, Name: r.Alert + r.Record, Expr: r.Expr,
						For: r.For.String(), Labels: r.Labels, Metrics: names})
				}
			}
		}
	}
	for _, text := range in.Exprs {
		names, err := metrics(text)
		e := expr{Metrics: names}
		if err != nil {
			e.Error = err.Error()
		}
		out.Exprs = append(out.Exprs, e)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(2)
	}
}
