package web_test

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"herald/http/internal/apitest"
)

// webManifest is the part of the web app manifest the tests read.
type webManifest struct {
	ID              string `json:"id"`
	Name            string `json:"name"`
	ShortName       string `json:"short_name"`
	Description     string `json:"description"`
	StartURL        string `json:"start_url"`
	Scope           string `json:"scope"`
	Display         string `json:"display"`
	ThemeColor      string `json:"theme_color"`
	BackgroundColor string `json:"background_color"`
	Icons           []struct {
		Src, Sizes, Type, Purpose string
	} `json:"icons"`
}

// TestWebManifest: /manifest.webmanifest is the installable app's
// manifest, with every field installing needs, served and revalidated like
// the page; each icon it names is a PNG of the size it states, and the
// maskable one keeps its artwork inside the safe zone.
func TestWebManifest(t *testing.T) {
	e := apitest.New(t)
	res := webGet(t, "GET", e.URL+"/manifest.webmanifest", nil)
	if res.status != http.StatusOK {
		t.Fatalf("status = %d: %s", res.status, res.body)
	}
	if got, want := res.header.Get("Content-Type"), "application/manifest+json"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	checkFixedAddress(t, e.URL+"/manifest.webmanifest", res)

	var m webManifest
	if err := json.Unmarshal(res.body, &m); err != nil {
		t.Fatalf("the manifest is not JSON: %v\n%s", err, res.body)
	}
	for field, got := range map[string]string{
		"name": m.Name, "short_name": m.ShortName, "description": m.Description,
	} {
		if strings.TrimSpace(got) == "" {
			t.Errorf("%s is empty", field)
		}
	}
	for field, c := range map[string][2]string{
		"start_url": {m.StartURL, "/"}, "scope": {m.Scope, "/"}, "display": {m.Display, "standalone"}, "id": {m.ID, "/"},
	} {
		if c[0] != c[1] {
			t.Errorf("%s = %q, want %q", field, c[0], c[1])
		}
	}
	colour := regexp.MustCompile(`^#[0-9a-f]{6}$`)
	if !colour.MatchString(m.ThemeColor) || !colour.MatchString(m.BackgroundColor) {
		t.Errorf("theme_color %q, background_color %q: want #rrggbb colours", m.ThemeColor, m.BackgroundColor)
	}

	var sizes []string
	maskable := 0
	for _, icon := range m.Icons {
		t.Run(icon.Src, func(t *testing.T) {
			if !strings.HasPrefix(icon.Src, "/assets/") {
				t.Errorf("icon %s is not one of the client's versioned assets", icon.Src)
			}
			if icon.Type != "image/png" {
				t.Errorf("type = %q, want image/png", icon.Type)
			}
			res := webGet(t, "GET", e.URL+icon.Src, nil)
			if res.status != http.StatusOK || res.header.Get("Content-Type") != "image/png" {
				t.Fatalf("status %d, Content-Type %q", res.status, res.header.Get("Content-Type"))
			}
			img, err := png.Decode(bytes.NewReader(res.body))
			if err != nil {
				t.Fatalf("not a PNG: %v", err)
			}
			b := img.Bounds()
			if got := pixelSize(b); got != icon.Sizes {
				t.Errorf("the PNG is %s, the manifest says %s", got, icon.Sizes)
			}
			if icon.Purpose == "maskable" {
				checkSafeZone(t, img)
			}
		})
		sizes = append(sizes, icon.Sizes)
		if slices.Contains(strings.Fields(icon.Purpose), "maskable") {
			maskable++
		}
	}
	for _, want := range []string{"192x192", "512x512"} {
		if !slices.Contains(sizes, want) {
			t.Errorf("no %s icon: %v", want, sizes)
		}
	}
	if maskable == 0 {
		t.Error("no maskable icon")
	}

	// The page links the manifest, its theme colour and the home-screen
	// icon of iPhones, which read no manifest icons.
	page := string(webGet(t, "GET", e.URL+"/", nil).body)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`<link rel="manifest" href="/manifest\.webmanifest">`),
		regexp.MustCompile(`<meta name="theme-color" content="#[0-9a-f]{6}"`),
		regexp.MustCompile(`<link rel="apple-touch-icon" href="/assets/[0-9a-f]{16}/apple-touch-icon\.png">`),
	} {
		if !want.MatchString(page) {
			t.Errorf("the page lacks %s", want)
		}
	}
	touch := regexp.MustCompile(`/assets/[0-9a-f]{16}/apple-touch-icon\.png`).FindString(page)
	if img, err := png.Decode(bytes.NewReader(webGet(t, "GET", e.URL+touch, nil).body)); err != nil {
		t.Errorf("%s: %v", touch, err)
	} else if got := pixelSize(img.Bounds()); got != "180x180" {
		t.Errorf("%s is %s, want 180x180", touch, got)
	}
}

func pixelSize(b image.Rectangle) string {
	return strings.Join([]string{strconv.Itoa(b.Dx()), strconv.Itoa(b.Dy())}, "x")
}

// checkSafeZone fails unless a maskable icon's colour reaches every corner
// (a mask may keep any of it) and whatever differs from that background
// lies inside the central circle of radius 40 % of the size, which every
// mask keeps.
func checkSafeZone(t *testing.T, img image.Image) {
	t.Helper()
	b := img.Bounds()
	bg := img.At(b.Min.X, b.Min.Y)
	for _, p := range []image.Point{{b.Max.X - 1, b.Min.Y}, {b.Min.X, b.Max.Y - 1}, {b.Max.X - 1, b.Max.Y - 1}} {
		if !sameColour(img.At(p.X, p.Y), bg) {
			t.Errorf("corner %v is not the background colour: a mask cutting little would show it", p)
		}
	}
	if _, _, _, a := bg.RGBA(); a != 0xffff {
		t.Error("the background is not opaque")
	}
	cx, cy := float64(b.Min.X+b.Max.X)/2, float64(b.Min.Y+b.Max.Y)/2
	r := 0.4 * float64(b.Dx())
	artwork := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if sameColour(img.At(x, y), bg) {
				continue
			}
			artwork++
			if d := math.Hypot(float64(x)+0.5-cx, float64(y)+0.5-cy); d > r {
				t.Fatalf("artwork at (%d, %d), %.1f from the centre, outside the safe zone's %.1f", x, y, d, r)
			}
		}
	}
	if artwork == 0 {
		t.Error("the maskable icon is all background")
	}
}

func sameColour(a, b interface{ RGBA() (r, g, b, a uint32) }) bool {
	ar, ag, ab, aa := a.RGBA()
	br, bg, bb, ba := b.RGBA()
	return ar == br && ag == bg && ab == bb && aa == ba
}

// checkFixedAddress checks what the files at fixed addresses (/, the
// manifest, the worker) share with the page: revalidated on each visit by
// ETag, gzip when asked for, the page's CSP.
func checkFixedAddress(t *testing.T, url string, res *webResponse) {
	t.Helper()
	if got, want := res.header.Get("Cache-Control"), "no-cache"; got != want {
		t.Errorf("Cache-Control = %q, want %q", got, want)
	}
	if got, want := res.header.Get("Vary"), "Accept-Encoding"; got != want {
		t.Errorf("Vary = %q, want %q", got, want)
	}
	checkWebCSP(t, res.header)
	etag := res.header.Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]+"$`).MatchString(etag) {
		t.Errorf("ETag = %q, want a strong tag", etag)
	}
	if again := webGet(t, "GET", url, http.Header{"If-None-Match": {etag}}); again.status != http.StatusNotModified || len(again.body) != 0 {
		t.Errorf("revalidation: status %d with %d bytes, want 304 and none", again.status, len(again.body))
	}
	zipped := webGet(t, "GET", url, http.Header{"Accept-Encoding": {"gzip"}})
	if zipped.header.Get("Content-Encoding") != "gzip" || !bytes.Equal(gunzip(t, zipped.body), res.body) {
		t.Errorf("Accept-Encoding gzip: Content-Encoding %q, or a body that does not unpack to the identity one", zipped.header.Get("Content-Encoding"))
	}
	if head := webGet(t, "HEAD", url, nil); head.status != http.StatusOK || len(head.body) != 0 || head.header.Get("Content-Length") != res.header.Get("Content-Length") {
		t.Errorf("HEAD: status %d, %d bytes, Content-Length %q; want 200, none, %q", head.status, len(head.body), head.header.Get("Content-Length"), res.header.Get("Content-Length"))
	}
}

// TestWebWorker: /sw.js is served at the root (its scope is the directory
// it comes from) as JavaScript, revalidated on each visit so that a new
// version arrives, holding this version's shell to keep offline: the page
// and every asset, and nothing of the API.
func TestWebWorker(t *testing.T) {
	e := apitest.New(t)
	res := webGet(t, "GET", e.URL+"/sw.js", nil)
	if res.status != http.StatusOK {
		t.Fatalf("status = %d: %s", res.status, res.body)
	}
	if got, want := res.header.Get("Content-Type"), "text/javascript; charset=utf-8"; got != want {
		t.Errorf("Content-Type = %q, want %q", got, want)
	}
	checkFixedAddress(t, e.URL+"/sw.js", res)
	worker := string(res.body)
	if strings.Contains(worker, "{{") {
		t.Error("the worker still holds a template mark")
	}
	m := regexp.MustCompile(`const SHELL = '([^']*)'`).FindStringSubmatch(worker)
	if m == nil {
		t.Fatal("the worker names no shell")
	}
	shell := strings.Fields(m[1])
	files := webFiles(t, e.URL)
	for _, u := range files {
		if u == "/" || strings.HasPrefix(u, "/assets/") {
			if !slices.Contains(shell, u) {
				t.Errorf("the shell lacks %s, which the client loads", u)
			}
		}
	}
	for _, u := range shell {
		if strings.HasPrefix(u, "/api/") {
			t.Errorf("the shell keeps %s, an API answer", u)
		}
		if got := webGet(t, "GET", e.URL+u, nil); got.status != http.StatusOK {
			t.Errorf("the shell's %s: status %d", u, got.status)
		}
	}
	// Only at the root: a copy under /assets/ would be a second worker of
	// a narrower scope.
	version := regexp.MustCompile(`const VERSION = '([0-9a-f]{16})'`).FindStringSubmatch(worker)
	if version == nil {
		t.Fatal("the worker carries no version")
	}
	for _, p := range []string{"/assets/" + version[1] + "/sw.js", "/assets/" + version[1] + "/manifest.webmanifest", "/sw.js/"} {
		if got := webGet(t, "GET", e.URL+p, nil); got.status != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", p, got.status)
		}
	}
}
