package bolt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	bbolt "go.etcd.io/bbolt"
)

// The merged part of the search index keeps each word's postings in
// blocks: the key is term‖0x00‖first, the block's smallest message ID,
// big-endian; the value is the block's other IDs, ascending, each as the
// uvarint of its distance from the one before. So a word's blocks sort by
// ID, and the block holding the largest ID at or below some n is the last
// key at or below term‖0‖n: one seek, as with a key per posting.
//
// A key per posting would make a merge one Bucket.Put per posting, much of
// the committer's work under a stream of creates, and the index larger than
// the messages it indexes (docs/performance.md, "bbolt: posting blocks"). A
// merge appends each word's new IDs to its last block and writes it once; a
// common word's IDs are a byte apart.

// maxBlockBytes bounds a block's value. An edit or a delete of an old
// message rewrites the block holding it, and a search decodes a block
// whole, so blocks stay small; a few hundred bytes also keep several
// blocks to a page.
const maxBlockBytes = 256

// postingKey is the key of the block of term starting at first.
func postingKey(term []byte, first uint64) []byte {
	k := make([]byte, 0, len(term)+1+8)
	k = append(k, term...)
	k = append(k, termSeparator)
	return binary.BigEndian.AppendUint64(k, first)
}

// decodeBlock appends the IDs of the block first, rest to dst; false for a
// value that is not a block of ascending IDs.
func decodeBlock(dst []uint64, first uint64, rest []byte) ([]uint64, bool) {
	return decodeBlockUpTo(dst, first, rest, math.MaxUint64)
}

// decodeBlockUpTo is decodeBlock stopping before the first ID above limit;
// what it leaves undecoded is not checked.
func decodeBlockUpTo(dst []uint64, first uint64, rest []byte, limit uint64) ([]uint64, bool) {
	dst = append(dst, first)
	id := first
	for len(rest) > 0 {
		d, n := binary.Uvarint(rest)
		if n <= 0 || d == 0 || id+d < id {
			return dst, false
		}
		if id += d; id > limit {
			break
		}
		dst = append(dst, id)
		rest = rest[n:]
	}
	return dst, true
}

// splitBlocks cuts ascending ids into blocks of at most maxBlockBytes,
// each filled before the next begins, and calls put with each block's
// first ID and value.
func splitBlocks(ids []uint64, put func(first uint64, rest []byte) error) error {
	var buf [maxBlockBytes + binary.MaxVarintLen64]byte
	for len(ids) > 0 {
		first, rest := ids[0], buf[:0]
		i := 1
		for ; i < len(ids); i++ {
			next := binary.AppendUvarint(rest, ids[i]-ids[i-1])
			if len(next) > maxBlockBytes {
				break
			}
			rest = next
		}
		if err := put(first, rest); err != nil {
			return err
		}
		ids = ids[i:]
	}
	return nil
}

// postingBlocks is one term's blocks in one bucket.
type postingBlocks struct {
	b      *bbolt.Bucket
	prefix []byte // term‖0
}

func termBlocks(b *bbolt.Bucket, term []byte) postingBlocks {
	return postingBlocks{b: b, prefix: termPrefix(term)}
}

// blockAtMost finds the block that holds id if any block does: the last
// one starting at or below id. It returns the block's IDs (appended to
// dst) and the first ID of the block after it (0 when there is none), or
// found false with next the first ID of the term's first block.
func (p postingBlocks) blockAtMost(dst []uint64, id uint64) (ids []uint64, next uint64, found bool, err error) {
	c := p.b.Cursor()
	first, v, after, ok := p.lastBlockAtMost(c, id)
	if after == nil && ok && first == id {
		after, _ = c.Next()
	}
	next, _ = p.firstOf(after)
	if !ok {
		return nil, next, false, nil
	}
	if ids, ok = decodeBlock(dst, first, v); !ok {
		return nil, 0, false, p.malformed(first)
	}
	return ids, next, true, nil
}

// lastBlockAtMost finds, through c, the term's last block starting at or
// below id: its first ID and value, or ok false. after is the key Seek
// found past id, when it found one; nil when the block starts at id, with
// c left on it.
//
// Blocks are deleted by writers, and a key deleted in a write transaction
// leaves its page in place, possibly empty, until the commit. bbolt
// v1.5.0's Prev then stops on an empty page and reports nil though blocks
// precede it, so a nil from Prev is checked by walking forward from the
// term's first block; Last goes through lastEntry.
func (p postingBlocks) lastBlockAtMost(c *bbolt.Cursor, id uint64) (first uint64, v, after []byte, ok bool) {
	k, v := c.Seek(binary.BigEndian.AppendUint64(p.prefix[:len(p.prefix):len(p.prefix)], id))
	if first, ok := p.firstOf(k); ok && first == id {
		return first, v, nil, true
	}
	after = k
	if k == nil {
		k, v = lastEntry(c)
	} else if k, v = c.Prev(); k == nil {
		for fk, fv := c.Seek(p.prefix); ; fk, fv = c.Next() {
			f, ok := p.firstOf(fk)
			if !ok || f > id {
				break
			}
			k, v = fk, fv
		}
	}
	first, ok = p.firstOf(k)
	return first, v, after, ok
}

func (p postingBlocks) malformed(first uint64) error {
	return fmt.Errorf("search index: the block of %q from message %d is malformed", p.prefix[:len(p.prefix)-1], first)
}

// has reports whether the term's blocks hold id. It reads the one block
// that could, only as far as id, into a buffer on the stack: the
// consistency check asks it once for every word of every message.
func (p postingBlocks) has(id uint64) (bool, error) {
	first, v, _, ok := p.lastBlockAtMost(p.b.Cursor(), id)
	if !ok {
		return false, nil
	}
	var buf [maxBlockBytes + 1]uint64 // a block's most IDs: one a byte
	ids, ok := decodeBlockUpTo(buf[:0], first, v, id)
	if !ok {
		return false, p.malformed(first)
	}
	return ids[len(ids)-1] == id, nil
}

// firstOf reads the first ID of a key of this term's blocks; false for a
// key of another term.
func (p postingBlocks) firstOf(k []byte) (uint64, bool) {
	if len(k) != len(p.prefix)+8 || !bytes.HasPrefix(k, p.prefix) {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[len(p.prefix):]), true
}

// add puts ids (ascending, distinct) into the term's postings; an ID
// already there stays once. IDs above every one stored — every merge's —
// fill the last block and then new ones: one block read and a write or
// two per word.
func (p postingBlocks) add(ids []uint64) error {
	var scratch []uint64
	for len(ids) > 0 {
		block, next, found, err := p.blockAtMost(scratch[:0], ids[0])
		if err != nil {
			return err
		}
		// The IDs that belong in this block: below the next block's first.
		n := len(ids)
		if next != 0 {
			n, _ = slices.BinarySearch(ids, next)
		}
		var merged []uint64
		if found {
			merged = mergeIDs(block, ids[:n])
			if len(merged) == len(block) {
				ids = ids[n:]
				continue // all there already
			}
			// Rewritten under its first ID, which a merge cannot lower:
			// every ID added is at or above it.
		} else {
			merged = ids[:n]
		}
		if err := p.putBlocks(merged); err != nil {
			return err
		}
		scratch, ids = block, ids[n:]
	}
	return nil
}

// putBlocks writes ascending ids as blocks, replacing any block that
// starts at ids[0].
func (p postingBlocks) putBlocks(ids []uint64) error {
	return splitBlocks(ids, func(first uint64, rest []byte) error {
		return p.b.Put(postingKey(p.prefix[:len(p.prefix)-1], first), bytes.Clone(rest))
	})
}

// remove takes id out of the term's postings; an ID not there is no error.
func (p postingBlocks) remove(id uint64) error {
	block, _, found, err := p.blockAtMost(nil, id)
	if err != nil || !found {
		return err
	}
	i, ok := slices.BinarySearch(block, id)
	if !ok {
		return nil
	}
	term := p.prefix[:len(p.prefix)-1]
	if i == 0 {
		// The block's key names its first ID: it moves to the next one.
		if err := p.b.Delete(postingKey(term, id)); err != nil {
			return err
		}
	}
	block = slices.Delete(block, i, i+1)
	if len(block) == 0 {
		return nil
	}
	// Removing an ID only shortens a block, so it still fits in one.
	return p.putBlocks(block)
}

// mergeIDs returns the sorted union of ascending a and b, reusing a when b
// adds nothing.
func mergeIDs(a, b []uint64) []uint64 {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 || b[0] > a[len(a)-1] {
		return append(a, b...)
	}
	out := make([]uint64, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i, j = i+1, j+1
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}
