//go:build race

package auth_test

// raceEnabled lets timing tests run fewer rounds: the race detector makes a
// production-cost hash several times slower, without changing which of two
// equal computations is faster.
const raceEnabled = true
