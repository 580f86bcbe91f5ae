package pg

import (
	"maps"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The connection that holds the lead asks PostgreSQL for short TCP
// keepalives, so that a lead whose instance vanished is given up within a
// minute or so; a value the database URL sets is kept, and the pool's own
// settings are not touched.
func TestLeadConnKeepalives(t *testing.T) {
	pool, err := pgx.ParseConfig("postgres://herald@db.example/herald?tcp_keepalives_count=9&application_name=herald")
	if err != nil {
		t.Fatal(err)
	}
	before := maps.Clone(pool.RuntimeParams)
	got := leadConnConfig(pool).RuntimeParams
	want := map[string]string{
		"tcp_keepalives_idle":     "30",
		"tcp_keepalives_interval": "10",
		"tcp_keepalives_count":    "9", // the URL's
		"application_name":        "herald",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if !maps.Equal(pool.RuntimeParams, before) {
		t.Errorf("the pool's settings changed: %v, were %v", pool.RuntimeParams, before)
	}
}
