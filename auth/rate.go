package auth

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// ParseRate reads a Rate written as burst/interval, such as 10/5m: a burst
// of at least 1 and a positive interval, as Go writes durations. The flags
// and the settings an administrator changes write rates so.
func ParseRate(s string) (Rate, error) {
	burst, every, ok := strings.Cut(s, "/")
	n, err := strconv.Atoi(burst)
	if !ok || err != nil || n < 1 {
		return Rate{}, errors.New("want burst/interval such as 10/5m, with a burst of at least 1")
	}
	d, err := time.ParseDuration(every)
	if err != nil || d <= 0 {
		return Rate{}, errors.New("want burst/interval such as 10/5m, with a positive interval")
	}
	return Rate{Burst: n, Every: d}, nil
}

// String writes r as ParseRate reads it, its interval the way people
// write one: 5m, 720h, 1h30m, not 5m0s.
func (r Rate) String() string {
	every := r.Every.String()
	if strings.HasSuffix(every, "m0s") {
		every = strings.TrimSuffix(every, "0s")
	}
	if strings.HasSuffix(every, "h0m") {
		every = strings.TrimSuffix(every, "0m")
	}
	return strconv.Itoa(r.Burst) + "/" + every
}
