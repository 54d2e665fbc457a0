// Command kstatus computes the kstatus status of Kubernetes objects with the library itself
// (sigs.k8s.io/cli-utils/pkg/kstatus/status): the rules Flux uses when a Kustomization has no
// healthCheckExprs, Helm 4's --wait and `kubectl wait`-style tools. Used by
// tests/shipping/test_kstatus.py; reads a JSON array of objects on stdin and prints a JSON array of
// {"status": "...", "message": "..."} (or {"error": "..."}), one per object.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type result struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	Error   string `json:"error,omitempty"`
}

func main() {
	// Decoded as the API machinery decodes objects: whole numbers become int64, as kstatus expects.
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kstatus:", err)
		os.Exit(2)
	}
	var objects []any
	if err := utiljson.Unmarshal(data, &objects); err != nil {
		fmt.Fprintln(os.Stderr, "kstatus:", err)
		os.Exit(2)
	}
	out := make([]result, 0, len(objects))
	for _, item := range objects {
		obj, ok := item.(map[string]any)
		if !ok {
			out = append(out, result{Error: "not an object"})
			continue
		}
		res, err := status.Compute(&unstructured.Unstructured{Object: obj})
		if err != nil {
			out = append(out, result{Error: err.Error()})
			continue
		}
		out = append(out, result{Status: res.Status.String(), Message: res.Message})
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		os.Exit(2)
	}
}
