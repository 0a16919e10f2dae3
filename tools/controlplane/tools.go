//go:build tools

// Package controlplane pins the binaries that tools/controlplane builds. The
// blank imports keep `go mod tidy` honest about what the build needs; this file
// is never compiled (the build tag is never set).
package controlplane

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
