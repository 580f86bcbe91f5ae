// Package model holds what every layer of Herald speaks: users, tokens,
// messages, searches and changes, the rules their fields follow, the kinds
// of error a store returns, and the one word splitter that content,
// queries, the live stream's filters and every store use alike. It knows
// nothing of storage or HTTP, so a store and the API agree on the rules by
// calling the same code.
package model
