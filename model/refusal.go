package model

// LastAdministrator refuses to let u, the last account able to
// administer, be what (deleted, suspended, stripped of the role).
func LastAdministrator(u *User, what string) error {
	return Errorf(ErrConflict, "%s is the last administrator and cannot be %s; make another account an administrator first", u.Email, what)
}

// InviteRefused is the one answer to a registration whose invitation is
// unknown, used up, revoked or expired: which of them is nobody's business
// but the administrator's.
func InviteRefused() error {
	var v ValidationError
	v.Add("invite", "is not a valid invitation: it is unknown, used up, revoked or expired")
	return &v
}

// ResetCodeRefused is the one answer to a password reset whose code is
// unknown, used or expired.
func ResetCodeRefused() error {
	var v ValidationError
	v.Add("code", "is not a valid password-reset code: it is unknown, used or expired; ask an administrator for a new one")
	return &v
}

// EmailTaken is the refusal of an account whose e-mail another account
// has, in any letter case (the same EmailKey).
func EmailTaken(email string) error {
	return Errorf(ErrConflict, "the e-mail %s is already registered", email)
}

// EmailLookAlike is the refusal of an account whose e-mail looks like
// another account's (the same EmailSkeleton): shown beside a message, one
// could pass for the other.
func EmailLookAlike(email string) error {
	return Errorf(ErrConflict, "the e-mail %s looks like the address of an existing account (the same letters drawn alike); register with another address", email)
}
