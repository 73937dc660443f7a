// registry: an OCI registry on loopback for the release packaging tests. Test tooling only;
// never shipped.
module registry

go 1.26.0

require github.com/google/go-containerregistry v0.22.1
