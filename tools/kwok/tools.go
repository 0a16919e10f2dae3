//go:build tools

// Package kwok pins the KWOK controller that tools/kwok builds. The blank import keeps
// `go mod tidy` honest about what the build needs; this file is never compiled (the build
// tag is never set).
package kwok

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
