// Pins the upstream operator whose CRDs (config/crd/bases/*.yaml) tests/crds.rs compares ours
// with. Only downloaded into the Go module cache (fetch.sh), never built or copied.
// The pin is upstream HEAD 0e1f157a, the commit the behavioural spec describes.
module reference

go 1.26.0

require github.com/l7mp/stunner-gateway-operator v1.2.2-0.20260703204206-0e1f157afb96
