#!/usr/bin/env bash
# Renders the HTML budget report in headless Chromium and checks that its charts render: the DOM Chromium builds
# keeps every chart (<svg>) and bar of the page, and the screenshot shows the bar colours. Writes the screenshot.
# Not part of CI (Chromium is not a CI dependency): run it by hand after changing the HTML or the charts, e.g.
#   bash scripts/check_report_html.sh build/release/cli/gpuplan data/scenarios/llama-3.1-70b-budget.json docs/report-screenshot.png
# Exit 0 ok, 1 a check failed, 77 Chromium is missing (apt-get install -y chromium).
set -euo pipefail
cd "$(dirname "$0")/.."
exe=${1:-build/release/cli/gpuplan}
plan=${2:-data/scenarios/llama-3.1-70b-budget.json}
shot=${3:-build/report-screenshot.png}
command -v chromium >/dev/null || { echo "check_report_html: chromium not found (apt-get install -y chromium)" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
"$exe" report "$plan" --format html --output "$tmp/report.html" || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { echo "check_report_html: gpuplan report exited $rc" >&2; exit 1; }
chrome=(chromium --headless --no-sandbox --disable-gpu --hide-scrollbars)
"${chrome[@]}" --dump-dom "file://$tmp/report.html" >"$tmp/dom.html" 2>/dev/null
count() { grep -o "$1" "$2" | wc -l; }
svg_src=$(count '<svg ' "$tmp/report.html"); svg_dom=$(count '<svg ' "$tmp/dom.html")
bar_src=$(count '<rect class="bar' "$tmp/report.html"); bar_dom=$(count '<rect class="bar' "$tmp/dom.html")
if [ "$svg_src" -eq 0 ] || [ "$svg_src" -ne "$svg_dom" ] || [ "$bar_src" -ne "$bar_dom" ]; then
  echo "check_report_html: the page has $svg_src charts and $bar_src bars, Chromium's DOM $svg_dom and $bar_dom" >&2
  exit 1
fi
mkdir -p "$(dirname "$shot")"
"${chrome[@]}" --screenshot="$shot" --window-size=1200,2000 "file://$tmp/report.html" >/dev/null 2>&1
# The screenshot must show the bars: count pixels of the two bar colours (a PNG decoder in the standard library).
python3 - "$shot" <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8]); body = data[pos + 8:pos + 8 + n]; pos += 12 + n
    if kind == b"IHDR": w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
    elif kind == b"IDAT": idat += body
assert depth == 8 and ctype in (2, 6), "unexpected PNG format"
bpp = 3 if ctype == 2 else 4
raw, stride, prev, rows = zlib.decompress(idat), w * bpp, bytearray(w * bpp), []
for y in range(h):
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0; b = prev[i]; c = prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line); prev = line
green = sum(1 for r in rows for x in range(w) if tuple(r[x * bpp:x * bpp + 3]) == (0x2e, 0x8b, 0x57))
blue = sum(1 for r in rows for x in range(w) if tuple(r[x * bpp:x * bpp + 3]) == (0x8a, 0xa4, 0xc8))
print(f"screenshot {w}x{h}: {green} px of cheapest bars, {blue} px of other bars")
sys.exit(0 if green > 500 and blue > 500 else 1)
PY
echo "ok: $svg_dom charts with $bar_dom bars in Chromium's DOM; screenshot $shot"
