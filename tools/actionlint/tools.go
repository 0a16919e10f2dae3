//go:build tools

// Builds the pinned actionlint that .ci/run lints .github/workflows/ with (tools/actionlint/build.sh).
// After changing the version in go.mod: `go mod tidy` here, then build.sh rebuilds (the stamp changes).
package tools

import (
	_ "github.com/rhysd/actionlint/cmd/actionlint"
)
