// Command kubectl is the Kubernetes command-line client, built from the published
// k8s.io/kubectl module so that vigil's tests can run `kubectl kustomize` and
// `kubectl apply --server-side --dry-run=server` against vigil-testenv without a package
// that ships kubectl. It is kubectl's own command tree; only this entry point is ours.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() {
	os.Exit(cli.Run(cmd.NewDefaultKubectlCommand()))
}
