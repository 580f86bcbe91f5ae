package model

// Caller is who an operation is made for. A store resolves it inside the
// operation's own transaction: a token revoked while a write waited cannot
// complete it, and a read checks its token in the snapshot it reads.
type Caller struct {
	userID uint64
	token  *TokenHash
	server bool
}

// ByToken is the caller holding the bearer token with this hash: every write
// a client asks for. The token is checked again inside the write's
// transaction, so a logout that committed first wins.
func ByToken(hash TokenHash) Caller { return Caller{token: &hash} }

// ByUser is user id acting without a token: for tools and tests that act
// for an account directly.
func ByUser(id uint64) Caller { return Caller{userID: id} }

// ByServer is the service itself, acting for no account: its tools, its
// chores and tests reading what is stored, and the operator on the
// server's machine (herald admin). A store answers its reads with no
// user, refuses it the writes of an account (it has none), and lets it
// make administrative acts, which the audit log records as made on the
// server's machine. No request can make one. (The zero Caller is nobody,
// and every store refuses it.)
func ByServer() Caller { return Caller{server: true} }

// Server reports whether the caller is ByServer's.
func (c Caller) Server() bool { return c.server }

// Token returns the hash of the caller's bearer token, and false for a
// caller made with ByUser.
func (c Caller) Token() (TokenHash, bool) {
	if c.token == nil {
		return TokenHash{}, false
	}
	return *c.token, true
}

// UserID is the account of a caller made with ByUser; zero for one made
// with ByToken, whose account the store finds from the token.
func (c Caller) UserID() uint64 { return c.userID }
