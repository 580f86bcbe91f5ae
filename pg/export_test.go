package pg

// SearchSpan is searchSpan, for tests that build a worst case beyond it.
var SearchSpan = searchSpan
