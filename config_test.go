package main

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"herald/auth"
	"herald/chores"
	heraldhttp "herald/http"
	heraldmail "herald/mail"
)

func TestParseConfig(t *testing.T) {
	defaults := config{
		addr:              "127.0.0.1:8080",
		dbPath:            "herald.db",
		dbTimeout:         10 * time.Second,
		tokenTTL:          720 * time.Hour,
		maxBody:           65536,
		hashConcurrency:   runtime.NumCPU(),
		shutdownTimeout:   10 * time.Second,
		logFormat:         "text",
		loginPerAccount:   auth.LoginFailuresPerAccount(),
		loginPerAddress:   auth.LoginFailuresPerAddress(),
		registerPerAddr:   auth.RegistrationsPerAddress(),
		streamsPerUser:    16,
		streams:           10000,
		changesKeepFor:    7 * 24 * time.Hour,
		changesKeepMax:    100000,
		registration:      heraldhttp.RegistrationOpen,
		auditKeepFor:      365 * 24 * time.Hour,
		auditKeepMax:      100000,
		notificationsKeep: 90 * 24 * time.Hour,
		writesPerAcct:     auth.WritesPerAccount(),
		connsPerAddr:      512,
		tlsFlags:          tlsFlags{acmeDirectory: letsEncrypt},
	}
	with := func(f func(*config)) config {
		c := defaults
		f(&c)
		return c
	}
	tests := []struct {
		name    string
		args    []string
		vars    map[string]string
		want    config
		wantErr string // substring of the error; "" means no error
	}{
		{name: "Defaults", want: defaults},
		{name: "Registration", args: []string{"--registration", "invite"}, want: with(func(c *config) { c.registration = heraldhttp.RegistrationInvite })},
		{name: "EnvRegistration", vars: map[string]string{"HERALD_REGISTRATION": "closed"}, want: with(func(c *config) { c.registration = heraldhttp.RegistrationClosed })},
		{name: "RegistrationUnknown", args: []string{"--registration", "friends"}, wantErr: "registration"},
		{name: "WritesPerAccount", args: []string{"--writes-per-account", "10/1m"}, want: with(func(c *config) { c.writesPerAcct = auth.Rate{Burst: 10, Every: time.Minute} })},
		{name: "WritesPerAccountZero", args: []string{"--writes-per-account", "0/1m"}, wantErr: "writes-per-account"},
		{name: "PublicURL", args: []string{"--public-url", "https://herald.example.com"}, want: with(func(c *config) { c.publicURL = "https://herald.example.com" })},
		{name: "PublicURLWithPath", args: []string{"--public-url", "https://herald.example.com/app"}, wantErr: "public-url"},
		{name: "PushContactMailto", args: []string{"--push-contact", "mailto:ops@example.com"}, want: with(func(c *config) { c.pushContact = "mailto:ops@example.com" })},
		{name: "PushContactHTTPS", vars: map[string]string{"HERALD_PUSH_CONTACT": "https://example.com/contact", "HERALD_PUSH_ALLOW_PRIVATE": "true"},
			want: with(func(c *config) { c.pushContact, c.pushAllowPrivate = "https://example.com/contact", true })},
		{name: "PushContactBare", args: []string{"--push-contact", "ops@example.com"}, wantErr: "push-contact"},
		{name: "PushContactHTTP", args: []string{"--push-contact", "http://example.com"}, wantErr: "push-contact"},
		{name: "PushContactMailtoEmpty", args: []string{"--push-contact", "mailto:"}, wantErr: "push-contact"},
		{name: "PushAllowPrivateAlone", args: []string{"--push-allow-private"}, wantErr: "push-allow-private"},
		{name: "PublicURLNoScheme", args: []string{"--public-url", "herald.example.com"}, wantErr: "public-url"},
		{name: "SMTP", args: []string{"--public-url", "https://herald.example.com", "--smtp", "smtp://ada:pw@mail.example.com"}, want: with(func(c *config) {
			c.publicURL, c.smtp = "https://herald.example.com", "smtp://ada:pw@mail.example.com"
			c.mailFlags.settings = heraldmail.Settings{Host: "mail.example.com", Port: 587, Username: "ada", Password: "pw", From: "Herald <herald@herald.example.com>"}
		})},
		{name: "SMTPMailFrom", vars: map[string]string{"HERALD_PUBLIC_URL": "https://herald.example.com", "HERALD_SMTP": "smtps://mail.example.com", "HERALD_MAIL_FROM": "news@example.com"}, want: with(func(c *config) {
			c.publicURL, c.smtp, c.mailFrom = "https://herald.example.com", "smtps://mail.example.com", "news@example.com"
			c.mailFlags.settings = heraldmail.Settings{Host: "mail.example.com", Port: 465, ImplicitTLS: true, From: "news@example.com"}
		})},
		{name: "SMTPWithoutPublicURL", args: []string{"--smtp", "smtp://mail.example.com"}, wantErr: "--smtp (HERALD_SMTP) needs --public-url"},
		{name: "SMTPBadURL", args: []string{"--public-url", "https://h.example", "--smtp", "mail.example.com"}, wantErr: "--smtp (HERALD_SMTP) must be a URL"},
		{name: "SMTPPlainTextElsewhere", args: []string{"--public-url", "https://h.example", "--smtp", "smtp://mail.example.com?tls=none"}, wantErr: "only for a mail server on this machine"},
		{name: "SMTPBadMailFrom", args: []string{"--public-url", "https://h.example", "--smtp", "smtp://mail.example.com", "--mail-from", "not an address"}, wantErr: "mail-from"},
		{name: "MailFromWithoutSMTP", args: []string{"--mail-from", "news@example.com"}, wantErr: "--mail-from (HERALD_MAIL_FROM) needs --smtp"},
		{name: "SMTPPasswordFileWithoutSMTP", args: []string{"--smtp-password-file", "/nonexistent"}, wantErr: "--smtp-password-file (HERALD_SMTP_PASSWORD_FILE) needs --smtp"},
		{name: "AuditKeep", args: []string{"--audit-keep", "90d", "--audit-max", "5000"}, want: with(func(c *config) { c.auditKeepFor, c.auditKeepMax = 90*24*time.Hour, 5000 })},
		{name: "AuditMaxZero", args: []string{"--audit-max", "0"}, wantErr: "audit-max"},
		{name: "EmptyVariablesAreUnset", vars: map[string]string{"HERALD_ADDR": "", "HERALD_DB": ""}, want: defaults},

		{name: "EnvAddr", vars: map[string]string{"HERALD_ADDR": ":9000"}, want: with(func(c *config) { c.addr = ":9000" })},
		{name: "EnvDB", vars: map[string]string{"HERALD_DB": "/var/lib/herald/h.db"}, want: with(func(c *config) { c.dbPath = "/var/lib/herald/h.db" })},
		{name: "EnvTokenTTL", vars: map[string]string{"HERALD_TOKEN_TTL": "1h30m"}, want: with(func(c *config) { c.tokenTTL = 90 * time.Minute })},
		{name: "EnvMaxBody", vars: map[string]string{"HERALD_MAX_BODY": "1048576"}, want: with(func(c *config) { c.maxBody = 1 << 20 })},
		{name: "EnvHashConcurrency", vars: map[string]string{"HERALD_HASH_CONCURRENCY": "3"}, want: with(func(c *config) { c.hashConcurrency = 3 })},
		{name: "EnvShutdownTimeout", vars: map[string]string{"HERALD_SHUTDOWN_TIMEOUT": "2s"}, want: with(func(c *config) { c.shutdownTimeout = 2 * time.Second })},
		{name: "EnvLogFormat", vars: map[string]string{"HERALD_LOG_FORMAT": "json"}, want: with(func(c *config) { c.logFormat = "json" })},

		{
			name: "AllFlags",
			args: []string{"--addr", ":1", "--db=x.db", "--token-ttl", "5m", "--max-body", "2048", "--hash-concurrency", "7", "--shutdown-timeout", "0s", "-log-format", "json"},
			want: with(func(c *config) {
				c.addr, c.dbPath, c.tokenTTL, c.maxBody, c.hashConcurrency, c.shutdownTimeout, c.logFormat = ":1", "x.db", 5*time.Minute, 2048, 7, 0, "json"
			}),
		},
		{
			name: "FlagsBeatVariables",
			args: []string{"--addr", ":1", "--db=x.db", "--token-ttl", "5m", "--max-body", "2048", "--hash-concurrency", "7", "--shutdown-timeout", "1s", "--log-format", "json"},
			vars: map[string]string{
				"HERALD_ADDR": ":2", "HERALD_DB": "y.db", "HERALD_TOKEN_TTL": "6m", "HERALD_MAX_BODY": "4096",
				"HERALD_HASH_CONCURRENCY": "8", "HERALD_SHUTDOWN_TIMEOUT": "3s", "HERALD_LOG_FORMAT": "text",
			},
			want: with(func(c *config) {
				c.addr, c.dbPath, c.tokenTTL, c.maxBody, c.hashConcurrency, c.shutdownTimeout, c.logFormat = ":1", "x.db", 5*time.Minute, 2048, 7, time.Second, "json"
			}),
		},
		{
			name: "FlagAndVariableMix",
			args: []string{"--db", "flag.db"},
			vars: map[string]string{"HERALD_ADDR": ":2", "HERALD_DB": "env.db"},
			want: with(func(c *config) { c.addr, c.dbPath = ":2", "flag.db" }),
		},
		{
			// A variable a flag overrides is not even parsed.
			name: "FlagBeatsInvalidVariable",
			args: []string{"--token-ttl", "1h"},
			vars: map[string]string{"HERALD_TOKEN_TTL": "soon"},
			want: with(func(c *config) { c.tokenTTL = time.Hour }),
		},
		{name: "DBTimeout", vars: map[string]string{"HERALD_DB_TIMEOUT": "30s"}, want: with(func(c *config) { c.dbTimeout = 30 * time.Second })},
		{name: "DBTimeoutZero", args: []string{"--db-timeout", "0"}, wantErr: "--db-timeout (HERALD_DB_TIMEOUT) must be positive"},
		{name: "Retain", args: []string{"--retain", "30d"}, want: with(func(c *config) { c.retain = 720 * time.Hour })},
		{name: "RetainNegative", vars: map[string]string{"HERALD_RETAIN": "-1h"}, wantErr: "retain"},
		{name: "Streams", args: []string{"--max-streams", "50000", "--max-streams-per-user", "4"}, want: with(func(c *config) { c.streams, c.streamsPerUser = 50000, 4 })},
		{name: "ConnsPerAddress", args: []string{"--max-conns-per-address", "16"}, want: with(func(c *config) { c.connsPerAddr = 16 })},
		{name: "ConnsPerAddressOff", vars: map[string]string{"HERALD_MAX_CONNS_PER_ADDRESS": "0"}, want: with(func(c *config) { c.connsPerAddr = 0 })},
		{name: "ConnsPerAddressNegative", args: []string{"--max-conns-per-address=-1"}, wantErr: "--max-conns-per-address (HERALD_MAX_CONNS_PER_ADDRESS) must not be negative"},
		{name: "ChangeLog", vars: map[string]string{"HERALD_CHANGES_KEEP": "1d", "HERALD_CHANGES_MAX": "500"}, want: with(func(c *config) { c.changesKeepFor, c.changesKeepMax = 24*time.Hour, 500 })},
		{name: "StreamsZero", args: []string{"--max-streams", "0"}, wantErr: "max-streams"},
		{name: "StreamsPerUserZero", vars: map[string]string{"HERALD_MAX_STREAMS_PER_USER": "0"}, wantErr: "max-streams-per-user"},
		{name: "ChangesKeepZero", args: []string{"--changes-keep", "0"}, wantErr: "changes-keep"},
		{name: "ChangesMaxZero", args: []string{"--changes-max", "0"}, wantErr: "changes-max"},
		{name: "TokenTTLDays", args: []string{"--token-ttl", "30d"}, want: with(func(c *config) { c.tokenTTL = 720 * time.Hour })},
		{name: "TokenTTLDaysAndHours", vars: map[string]string{"HERALD_TOKEN_TTL": "1d12h"}, want: with(func(c *config) { c.tokenTTL = 36 * time.Hour })},
		{name: "TokenTTLBadDays", args: []string{"--token-ttl", "xd"}, wantErr: "not a duration"},
		{name: "MaxBodyMinimum", args: []string{"--max-body", "1024"}, want: with(func(c *config) { c.maxBody = 1024 })},

		{name: "EnvInvalidTokenTTL", vars: map[string]string{"HERALD_TOKEN_TTL": "soon"}, wantErr: "HERALD_TOKEN_TTL"},
		{name: "EnvInvalidMaxBody", vars: map[string]string{"HERALD_MAX_BODY": "64KiB"}, wantErr: "HERALD_MAX_BODY"},
		{name: "EnvInvalidHashConcurrency", vars: map[string]string{"HERALD_HASH_CONCURRENCY": "two"}, wantErr: "HERALD_HASH_CONCURRENCY"},
		{name: "EnvInvalidShutdownTimeout", vars: map[string]string{"HERALD_SHUTDOWN_TIMEOUT": "10"}, wantErr: "HERALD_SHUTDOWN_TIMEOUT"},

		{name: "FlagInvalidTokenTTL", args: []string{"--token-ttl", "soon"}, wantErr: "token-ttl"},
		{name: "FlagInvalidMaxBody", args: []string{"--max-body", "big"}, wantErr: "max-body"},
		{name: "FlagInvalidHashConcurrency", args: []string{"--hash-concurrency=1.5"}, wantErr: "hash-concurrency"},
		{name: "FlagMissingValue", args: []string{"--addr"}, wantErr: "addr"},
		{name: "UnknownFlag", args: []string{"--bogus"}, wantErr: "bogus"},
		{name: "PositionalArgument", args: []string{"extra"}, wantErr: `"extra"`},
		{name: "PositionalAfterFlags", args: []string{"--addr", ":1", "extra"}, wantErr: `"extra"`},

		{name: "TokenTTLZero", args: []string{"--token-ttl", "0"}, wantErr: "token-ttl"},
		{name: "TokenTTLNegative", args: []string{"--token-ttl", "-1h"}, wantErr: "token-ttl"},
		{name: "MaxBodyTooSmall", args: []string{"--max-body", "10"}, wantErr: "max-body"},
		{name: "MaxBodyJustTooSmall", args: []string{"--max-body", "1023"}, wantErr: "max-body"},
		{name: "HashConcurrencyZero", args: []string{"--hash-concurrency", "0"}, wantErr: "hash-concurrency"},
		{name: "ShutdownTimeoutNegative", args: []string{"--shutdown-timeout", "-1s"}, wantErr: "shutdown-timeout"},
		{name: "LogFormatXML", args: []string{"--log-format", "xml"}, wantErr: "log-format"},
		{name: "EnvLogFormatXML", vars: map[string]string{"HERALD_LOG_FORMAT": "xml"}, wantErr: "log-format"},
		{name: "EnvHashConcurrencyZero", vars: map[string]string{"HERALD_HASH_CONCURRENCY": "0"}, wantErr: "HERALD_HASH_CONCURRENCY"},
		{name: "AddrEmpty", args: []string{"--addr="}, wantErr: "--addr (HERALD_ADDR) must not be empty"},
		{name: "DBEmpty", args: []string{"--db="}, wantErr: "--db (HERALD_DB) must not be empty"},

		{name: "LoginLimitFlag", args: []string{"--login-failures-per-account", "5/10m"}, want: with(func(c *config) { c.loginPerAccount = auth.Rate{Burst: 5, Every: 10 * time.Minute} })},
		{name: "AddressLimitEnv", vars: map[string]string{"HERALD_LOGIN_FAILURES_PER_ADDRESS": "50/30s"}, want: with(func(c *config) { c.loginPerAddress = auth.Rate{Burst: 50, Every: 30 * time.Second} })},
		{name: "RegisterLimitFlag", args: []string{"--registrations-per-address=3/1h"}, want: with(func(c *config) { c.registerPerAddr = auth.Rate{Burst: 3, Every: time.Hour} })},
		{name: "TrustedProxies", args: []string{"--trusted-proxies", "127.0.0.1/32, ::1, 10.0.0.0/8"}, want: with(func(c *config) { c.trustedProxies = "127.0.0.1/32, ::1, 10.0.0.0/8" })},
		{name: "HashQueue", vars: map[string]string{"HERALD_HASH_QUEUE": "8"}, want: with(func(c *config) { c.hashQueue = 8 })},
		{name: "LimitWithoutInterval", args: []string{"--login-failures-per-account", "10"}, wantErr: "login-failures-per-account"},
		{name: "LimitZeroBurst", args: []string{"--login-failures-per-account", "0/5m"}, wantErr: "login-failures-per-account"},
		{name: "LimitBadInterval", vars: map[string]string{"HERALD_REGISTRATIONS_PER_ADDRESS": "10/soon"}, wantErr: "HERALD_REGISTRATIONS_PER_ADDRESS"},
		{name: "TrustedProxiesGarbage", args: []string{"--trusted-proxies", "10.0.0.0/8,proxy.local"}, wantErr: `--trusted-proxies (HERALD_TRUSTED_PROXIES) has "proxy.local"`},
		{name: "HashQueueNegative", args: []string{"--hash-queue", "-1"}, wantErr: "hash-queue"},
		{name: "Admins", vars: map[string]string{"HERALD_ADMINS": "ada@example.com, root@example.org"}, want: with(func(c *config) { c.admins = "ada@example.com, root@example.org" })},
		{name: "MemoryLimit", args: []string{"--memory-limit", "200"}, want: with(func(c *config) { c.memoryLimitMiB = 200 })},
		{name: "MemoryLimitNegative", vars: map[string]string{"HERALD_MEMORY_LIMIT": "-5"}, wantErr: "memory-limit"},
		{name: "Procs", args: []string{"--procs", "3"}, want: with(func(c *config) { c.procs = 3 })},
		{name: "ProcsEnv", vars: map[string]string{"HERALD_PROCS": "6"}, want: with(func(c *config) { c.procs = 6 })},
		{name: "ProcsNegative", args: []string{"--procs=-1"}, wantErr: "--procs (HERALD_PROCS) must not be negative"},
		{name: "ProcsNotANumber", vars: map[string]string{"HERALD_PROCS": "many"}, wantErr: "HERALD_PROCS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			got, err := parseConfig(tt.args, environ(tt.vars), &stdout, &stderr)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("parseConfig(%q) = %+v, want an error mentioning %s", tt.args, got, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("error %q does not mention %s", err, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("parseConfig(%q): %v", tt.args, err)
				}
				if *got != tt.want {
					t.Errorf("parseConfig(%q) = %+v, want %+v", tt.args, *got, tt.want)
				}
			}
			if stdout.Len() != 0 || stderr.Len() != 0 {
				t.Errorf("parseConfig wrote stdout %q, stderr %q; only --help writes", stdout.String(), stderr.String())
			}
		})
	}
}

// TestChoresFor: each flag reaches what the chores keep.
func TestChoresFor(t *testing.T) {
	cfg, err := parseConfig([]string{"--retain", "30d", "--changes-keep", "48h", "--changes-max", "7",
		"--audit-keep", "90d", "--audit-max", "5000", "--notifications-keep", "30d"}, environ(nil), io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := chores.Config{FlushEvery: 30 * time.Second, SweepEvery: time.Minute, Retain: 720 * time.Hour,
		ChangesKeepFor: 48 * time.Hour, ChangesKeepMax: 7, AuditKeepFor: 2160 * time.Hour, AuditKeepMax: 5000,
		NotificationsKeepFor: 720 * time.Hour}
	if got := choresFor(cfg); got != want {
		t.Errorf("choresFor = %+v, want %+v", got, want)
	}
}
