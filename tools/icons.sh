#!/bin/sh
# Renders the web client's PNG icons from its artwork, http/web/icon.svg,
# for the manifest (installing the app), the iPhone's home screen and
# notifications. The PNGs are committed like the SVG; run this again after
# changing the SVG. It needs rsvg-convert (Debian: apt-get install
# librsvg2-bin), whose output for the same input and version is the same
# bytes.
set -eu
cd "$(dirname "$0")/../http/web"

# The artwork: a background square of one colour and one white path.
fill=$(sed -n 's/.*<rect[^>]* fill="\([^"]*\)".*/\1/p' icon.svg)
bubble=$(sed -n 's/.*<path d="\([^"]*\)".*/\1/p' icon.svg)
if [ -z "$fill" ] || [ -z "$bubble" ]; then
	echo "icons.sh: icon.svg is no longer a rect and a path; update this script" >&2
	exit 1
fi

# Launchers that show the icon as it is: the SVG's rounded square.
rsvg-convert -w 192 -h 192 icon.svg -o icon-192.png
rsvg-convert -w 512 -h 512 icon.svg -o icon-512.png

# Maskable (launchers that cut their own shape, any of circle, squircle or
# rounded square) and the iPhone's home screen, which rounds the corners
# itself: the colour reaches every edge, and the bubble, centred and scaled
# to 80 %, stays inside the central circle of 40 % of the size that every
# mask keeps (the "safe zone").
cat >maskable.svg.tmp <<SVG
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" fill="$fill"/><path transform="translate(16 16) scale(0.8) translate(-16 -18)" d="$bubble" fill="#fff"/></svg>
SVG
rsvg-convert -w 512 -h 512 maskable.svg.tmp -o icon-maskable-512.png
rsvg-convert -w 180 -h 180 maskable.svg.tmp -o apple-touch-icon.png

# A notification's badge: Android draws only its alpha, in one colour, in
# the status bar; so the bubble alone on transparency, filling the square.
cat >badge.svg.tmp <<SVG
<svg xmlns="http://www.w3.org/2000/svg" viewBox="5 8 22 20"><path d="$bubble" fill="#fff"/></svg>
SVG
rsvg-convert -w 96 -h 96 badge.svg.tmp -o badge.png
rm maskable.svg.tmp badge.svg.tmp
