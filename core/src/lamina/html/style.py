"""The pages' inline style sheets (no web fonts, no external resources): ``BASE`` for what every
Lamina page shares (type, headings, summary line, tables, warnings), ``CSS`` for the assembly
report's bars, status patterns and legend (``REPORT``) on top of it."""

from __future__ import annotations

#: Type, headings, the summary line, hints, warnings and number tables.
BASE = """
*{box-sizing:border-box}
body{margin:0;padding:24px 32px;font:14px/1.45 "DejaVu Sans",system-ui,sans-serif;
color:#1d2433;background:#fff}
main{max-width:1180px;margin:0 auto}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #d8dce5;padding-bottom:4px}
.meta{margin:2px 0;color:#4a5468}
.summary{margin:10px 0 0;font-size:15px}
.hint{margin:0 0 10px;color:#6b7385;font-size:12px}
#warnings ul{margin:0;padding-left:20px}
.warning{color:#8a3b00;margin:2px 0}
.none{color:#6b7385}
table{border-collapse:collapse;width:100%;font-size:12px}
th{text-align:left;color:#4a5468;font-weight:600;border-bottom:1px solid #b9c0cc;padding:4px 8px}
td{border-bottom:1px solid #eceef2;padding:3px 8px;vertical-align:top;overflow-wrap:anywhere}
th.n,td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr:hover td{background:#f3f6fb}
"""

#: The assembly report's own: truncated blocks are striped, summarized ones dotted, dropped ones
#: grey and hatched.
REPORT = """.bars{display:flex;flex-direction:column;gap:8px}
.row{display:flex;align-items:center;gap:10px}
.row .label{flex:0 0 130px;text-align:right;color:#4a5468;font-size:12px}
.bar,.prefix-track{flex:1;display:flex;height:30px;border:1px solid #b9c0cc;border-radius:3px;
overflow:hidden;background:#fff}
.prefix-track{height:22px;border-style:dashed;background:transparent}
.seg{flex:0 0 auto;min-width:1px;height:100%;overflow:hidden;white-space:nowrap;
border-right:1px solid rgba(255,255,255,.75);color:#fff;font-size:11px;line-height:30px}
.seg span{padding:0 5px}
.seg.light{color:#1d2433}
.seg:hover{outline:2px solid #111;outline-offset:-2px}
.overhead{background:#c9ced8;color:#333}
.remaining{background:repeating-linear-gradient(90deg,#f4f6f9 0 6px,#fff 6px 12px);
color:#6b7385;border-right:0}
.block.truncated,.swatch.truncated{background-image:repeating-linear-gradient(135deg,
rgba(255,255,255,.55) 0 3px,transparent 3px 7px)}
.block.summarized,.swatch.summarized{background-image:radial-gradient(rgba(255,255,255,.8) 1.2px,
transparent 1.6px);background-size:6px 6px}
.block.dropped,.swatch.dropped{background-color:#9aa1ad!important;background-image:
repeating-linear-gradient(45deg,rgba(0,0,0,.25) 0 2px,transparent 2px 6px)}
.prefix{height:100%;background:rgba(47,95,167,.16);border-right:3px solid #1f3f70;
color:#1f3f70;font-size:11px;line-height:20px;white-space:nowrap;overflow:visible}
.prefix span{padding:0 6px}
.legend{margin:12px 0 0 140px;font-size:12px;color:#4a5468}
.key{margin-right:16px;white-space:nowrap}
.swatch{display:inline-block;width:14px;height:14px;margin-right:5px;vertical-align:-2px;
border:1px solid #9aa1ad;border-radius:2px;background-color:#5d7fb4}
.swatch.kept{background-color:#5d7fb4}.swatch.truncated,.swatch.summarized{background-color:#5d7fb4}
.swatch.overhead{background:#c9ced8}.swatch.remaining{background:#f4f6f9}
.swatch.prefix{background:rgba(47,95,167,.16);border:1px dashed #1f3f70}
tr.dropped td{color:#6b7385}
.path{color:#6b7385;font-size:11px}
"""

#: The assembly report's whole sheet.
CSS = BASE + REPORT
