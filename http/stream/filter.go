package stream

import (
	"net"

	"herald/model"
)

// Filter is what a stream asked for: search's q and owner.
type Filter struct {
	Terms []string // the words every message sent must hold (model.Terms)
	Owner string   // the owner's e-mail; "" for everyone
}

// filter is a Filter as a round applies it.
type filter struct {
	terms []string
	owner string // model.EmailKey of Filter.Owner; "" for everyone
}

func (f Filter) compile() filter {
	c := filter{terms: f.Terms}
	if f.Owner != "" {
		c.owner = model.EmailKey(f.Owner)
	}
	return c
}

// passes reports whether a stream with this filter sends ev. An update
// passes when the message matched before it or matches after it, so a
// client showing a filtered list learns of a message that left it. An
// event whose owner is unknown passes any owner: only the deletions of an
// account purge that a release before the change log began lack one, and
// a deletion of a message the client never showed costs it nothing, while
// a missed one leaves a deleted message on its screen. A revocation passes
// no filter: it is never sent.
func (f *filter) passes(ev *event) bool {
	if ev.revoked != 0 || f.owner != "" && ev.owner != "" && ev.owner != f.owner {
		return false
	}
	return model.HasAllTerms(ev.terms, f.terms) || (ev.before != nil && model.HasAllTerms(ev.before, f.terms))
}

// gather appends to out the texts of the events of evs that pass, in as
// few pieces as they lie in (appendPiece).
func (f *filter) gather(out net.Buffers, evs []*event) net.Buffers {
	for _, ev := range evs {
		if f.passes(ev) {
			out = appendPiece(out, ev)
		}
	}
	return out
}
