package auth_test

import (
	"context"
	"testing"

	"herald/auth"
)

// The password benchmarks use DefaultParams: the figure that matters is the
// cost of one login on the production setting.

func BenchmarkHashDefault(b *testing.B) {
	h := auth.NewHasher(auth.DefaultParams(), 1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.Hash(ctx, "correct horse battery staple"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyDefault(b *testing.B) {
	h := auth.NewHasher(auth.DefaultParams(), 1)
	ctx := context.Background()
	encoded := mustHash(b, h, "correct horse battery staple")
	b.ReportAllocs()
	for b.Loop() {
		if ok, _, err := h.Verify(ctx, "correct horse battery staple", encoded); err != nil || !ok {
			b.Fatalf("Verify = %v, %v", ok, err)
		}
	}
}

func BenchmarkVerifyDummyDefault(b *testing.B) {
	h := auth.NewHasher(auth.DefaultParams(), 1)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := h.VerifyDummy(ctx, "correct horse battery staple"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMintToken(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := auth.MintToken(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHashToken(b *testing.B) {
	token, _ := mustMint(b)
	b.ReportAllocs()
	for b.Loop() {
		auth.HashToken(token)
	}
}

func BenchmarkWellFormedToken(b *testing.B) {
	token, _ := mustMint(b)
	b.ReportAllocs()
	for b.Loop() {
		if !auth.WellFormedToken(token) {
			b.Fatal("minted token not well-formed")
		}
	}
}
