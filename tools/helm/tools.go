//go:build tools

// Package helm pins the helm binary that tools/helm builds. The blank import keeps
// `go mod tidy` honest about what the build needs; this file is never compiled (the build
// tag is never set).
package helm

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
