// Package bench holds corekube's benchmarks (go test -bench; never timed
// assertions): pod create throughput over HTTP next to raw storage creates,
// LIST of 10,000 pods with and without a label selector, and start-up time
// and memory. The figures and the exact commands are in BENCHMARKS.md at
// the repository root.
//
// Everything runs in one process: the benchmark client, the API server and
// its embedded etcd (test/testserver), except start-up and memory, which
// re-execute the test binary so that each measurement starts from a fresh
// process.
package bench
