#!/usr/bin/env bash
# Renders the HTML budget report in headless Chromium and checks it as a reader sees it (issue #29 d5; a ctest,
# report_html, where Chromium is installed: `deps.sh fuzz` installs chromium-headless-shell for the test suite):
#  1. the DOM Chromium builds keeps every chart (<svg>) and bar of the page;
#  2. at a 420 px and a 1280 px wide window (a phone and a laptop), a copy of the page with a measuring script added
#     reports its layout: the page does not scroll sideways (scrollWidth <= the window), every chart fits the window,
#     is at most 720 px wide and has a value axis (tick labels) of at least three ticks, and no bar is drawn outside
#     its chart; at 1280 px every chart is 720 px wide (it only shrinks when the window is narrower);
#  3. the 1280 px screenshot shows the bar colours (written to the third argument).
#   bash scripts/check_report_html.sh build/release/cli/gpuplan data/scenarios/llama-3.1-70b-budget.json docs/report-screenshot.png
# Exit 0 ok, 1 a check failed, 77 Chromium is missing (apt-get install -y chromium-headless-shell).
set -euo pipefail
cd "$(dirname "$0")/.."
exe=${1:-build/release/cli/gpuplan}
plan=${2:-data/scenarios/llama-3.1-70b-budget.json}
shot=${3:-build/report-screenshot.png}
browser=${CHROMIUM:-}
[ -n "$browser" ] || browser=$(command -v chromium-headless-shell || command -v chromium || true)
[ -n "$browser" ] || { echo "check_report_html: no chromium-headless-shell or chromium (apt-get install -y chromium-headless-shell)" >&2; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
"$exe" report "$plan" --format html --output "$tmp/report.html" || rc=$?
[ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || { echo "check_report_html: gpuplan report exited $rc" >&2; exit 1; }
chrome=("$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run --user-data-dir="$tmp/profile")
"${chrome[@]}" --dump-dom "file://$tmp/report.html" >"$tmp/dom.html" 2>/dev/null
count() { grep -o "$1" "$2" | wc -l; }
svg_src=$(count '<svg ' "$tmp/report.html"); svg_dom=$(count '<svg ' "$tmp/dom.html")
bar_src=$(count '<rect class="bar' "$tmp/report.html"); bar_dom=$(count '<rect class="bar' "$tmp/dom.html")
if [ "$svg_src" -eq 0 ] || [ "$svg_src" -ne "$svg_dom" ] || [ "$bar_src" -ne "$bar_dom" ]; then
  echo "check_report_html: the page has $svg_src charts and $bar_src bars, Chromium's DOM $svg_dom and $bar_dom" >&2
  exit 1
fi
# The layout at a phone's and a laptop's width: the measuring script writes its findings into the copy's DOM.
python3 - "$tmp/report.html" "$tmp/measure.html" <<'PY'
import sys
page = open(sys.argv[1]).read()
probe = """<script>
window.addEventListener('load', function () {
  var W = window.innerWidth, out = {window: W, scroll: document.documentElement.scrollWidth, charts: []};
  document.querySelectorAll('svg.chart').forEach(function (svg) {
    var r = svg.getBoundingClientRect(), bad = 0;
    svg.querySelectorAll('rect.bar').forEach(function (b) {
      var q = b.getBoundingClientRect();
      if (q.left < r.left - 0.5 || q.right > r.right + 0.5 || q.width <= 0) bad++;
    });
    out.charts.push({id: svg.id, left: r.left, right: r.right, width: r.width, height: r.height,
                     ticks: svg.querySelectorAll('text.tick').length, bars_outside: bad});
  });
  var pre = document.createElement('pre'); pre.id = 'layout-probe';
  pre.textContent = 'LAYOUT ' + JSON.stringify(out); document.body.appendChild(pre);
});
</script>"""
open(sys.argv[2], "w").write(page.replace("</body>", probe + "</body>"))
PY
for width in 420 1280; do
  "${chrome[@]}" --window-size=$width,3000 --virtual-time-budget=3000 --dump-dom "file://$tmp/measure.html" \
    >"$tmp/layout-$width.html" 2>/dev/null
  python3 - "$tmp/layout-$width.html" "$width" <<'PY' || exit 1
import html, json, re, sys
m = re.search(r"LAYOUT (\{.*?\})</pre>", open(sys.argv[1]).read(), re.S)
if not m:
    sys.exit(f"check_report_html: at {sys.argv[2]} px the measuring script wrote nothing")
L, want, errs = json.loads(html.unescape(m.group(1))), int(sys.argv[2]), []
if L["scroll"] > L["window"]:
    errs.append(f"the page is {L['scroll']} px wide in a {L['window']} px window (it scrolls sideways)")
for c in L["charts"]:
    if c["left"] < -0.5 or c["right"] > L["window"] + 0.5:
        errs.append(f"chart {c['id']} spans {c['left']:.0f}..{c['right']:.0f} px, outside the window")
    if c["width"] > 720.5 or (want >= 1280 and abs(c["width"] - 720) > 0.5):
        errs.append(f"chart {c['id']} is {c['width']:.1f} px wide")
    if c["ticks"] < 3 or c["height"] <= 0:
        errs.append(f"chart {c['id']}: {c['ticks']} tick labels, height {c['height']:.0f} px")
    if c["bars_outside"]:
        errs.append(f"chart {c['id']}: {c['bars_outside']} bars outside the chart")
if not L["charts"]:
    errs.append("no charts measured")
for e in errs:
    print(f"check_report_html: {want} px: {e}", file=sys.stderr)
print(f"{want} px window: page {L['scroll']} px wide, {len(L['charts'])} charts "
      f"{min(c['width'] for c in L['charts']):.0f}-{max(c['width'] for c in L['charts']):.0f} px wide")
sys.exit(1 if errs else 0)
PY
done
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
