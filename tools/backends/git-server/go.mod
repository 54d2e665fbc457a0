// A smart-HTTP git server for the GitOps back-end, on github.com/fluxcd/gitkit.
module github.com/oasis-operator/tools/backends/git-server

go 1.26.0

require github.com/fluxcd/gitkit v0.6.0

require (
	github.com/gofrs/uuid v4.2.0+incompatible // indirect
	golang.org/x/crypto v0.54.0 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
