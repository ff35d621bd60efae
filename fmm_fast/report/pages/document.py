"""The page shell both pages share: one HTML document with its stylesheet and script inline.

Nothing is fetched: no font, stylesheet, script or image comes from elsewhere (images are data URIs).
The view and scale switches are checkboxes that CSS reads (`:has`), so they work without the script.
"""

from __future__ import annotations

from fmm_fast.report.pages.markup import Html, markup

STYLE = """
:root{--pos:#d6604d;--neg:#4393c3;--seq:#8c6bb1;color:#222;font-family:system-ui,-apple-system,"Segoe UI",
sans-serif}
body{margin:0;line-height:1.45}
header{padding:.6rem 1rem;border-bottom:1px solid #ddd;background:#fafafa}
h1{font-size:1.3rem;margin:0 0 .2rem}
h2{font-size:1.1rem;margin:1rem 0 .3rem}
h3{font-size:1rem;margin:1rem 0 .3rem}
.muted{color:#707070;font-size:.9em}
.controls{margin:.4rem 0}.controls label{margin-right:1.2rem;white-space:nowrap}
.legends{display:flex;flex-wrap:wrap;gap:.3rem 1.6rem;margin-top:.3rem;font-size:.9rem}
.legend{display:flex;align-items:center;gap:.45rem}
.bar{display:inline-block;width:8rem;height:.85rem;border:1px solid #bbb;border-radius:2px}
.bar.diverging{background:linear-gradient(to right,color-mix(in srgb,var(--neg) 85%,#fff),#fff,
color-mix(in srgb,var(--pos) 85%,#fff))}
.bar.sequential{background:linear-gradient(to right,#fff,color-mix(in srgb,var(--seq) 85%,#fff))}
.s{--m:var(--g);border-radius:3px;padding:0 1px}
.s.p{background:color-mix(in srgb,var(--pos) calc(var(--m) * 85%),#fff)}
.s.n{background:color-mix(in srgb,var(--neg) calc(var(--m) * 85%),#fff)}
.s.u{background:color-mix(in srgb,var(--seq) calc(var(--m) * 85%),#fff)}
.x{color:#9a9a9a}
.text{font-size:1.05rem;line-height:1.95;white-space:pre-wrap;overflow-wrap:anywhere}
.tokens .s,.tokens .x{margin-right:.3em;white-space:nowrap}
table.rows{border-collapse:collapse;width:100%}
table.rows th{vertical-align:top;text-align:left;padding:.35rem 1rem .35rem 0;white-space:nowrap;width:1%;
font-weight:600}
table.rows td{padding:.2rem 0;border-top:1px solid #eee}
.right{color:#1a7f37}.wrong{color:#c62828}
.pair{color:#555}
.tokens,.ends.tokens,.ends.own{display:none}
body:has(#view-tokens:checked) .words{display:none}
body:has(#view-tokens:checked) .text.tokens{display:block}
body:has(#view-tokens:checked) .ends.page.tokens{display:inline}
body:has(#own-scale:checked) .s{--m:var(--x)}
body:has(#own-scale:checked) .legend .ends.page{display:none}
body:has(#own-scale:checked) .legend .ends.own{display:inline}
.layout{display:flex;align-items:flex-start}
nav{width:30rem;max-width:45vw;max-height:calc(100vh - 1rem);overflow:auto;position:sticky;top:0;
border-right:1px solid #ddd}
nav .filters{padding:.4rem;position:sticky;top:0;background:#fff;border-bottom:1px solid #eee}
nav input[type=search]{width:12rem}
nav table{border-collapse:collapse;width:100%;font-size:.85rem}
nav th{text-align:left;padding:.2rem .4rem;background:#f3f3f3;position:sticky;top:2.3rem}
nav td{padding:.15rem .4rem;border-bottom:1px solid #eee;white-space:nowrap}
nav td.snippet{max-width:13rem;overflow:hidden;text-overflow:ellipsis}
nav td.snippet a{color:inherit;text-decoration:none}
nav tbody tr{cursor:pointer}nav tbody tr:hover{background:#f4f7ff}nav tbody tr.selected{background:#dde7fb}
main{flex:1;min-width:0;padding:0 1.2rem 2rem}
main.browser .example{display:none}
main.browser .example:target{display:block}
main.browser:not(:has(.example:target)) .example:first-of-type{display:block}
.report{max-width:72rem;margin:0 auto;padding:0 1.2rem 3rem}
.report table.data{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.9rem}
.report table.data th,.report table.data td{border:1px solid #ddd;padding:.2rem .5rem;text-align:left}
.report table.data th{background:#f3f3f3}
.report figure{margin:.8rem 0}.report figure img{max-width:100%;border:1px solid #eee}
.report figcaption{font-size:.85rem;color:#555}
.report pre{background:#f6f6f6;padding:.5rem;overflow:auto;font-size:.8rem}
"""


# In the head of every page: what tells fmm-fast that a page at an --out path is its own to replace.
GENERATOR = '<meta name="generator" content="fmm-fast">'
_SHELL = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8">{generator}'
    '<meta name="viewport" content="width=device-width,initial-scale=1">'
    "<title>{title}</title><style>{style}</style></head><body>{body}{tail}</body></html>\n"
)
VIEW_CONTROLS = (
    '<div class="controls"><label><input type="checkbox" id="view-tokens"> show model tokens instead '
    'of words</label><label><input type="checkbox" id="own-scale"> scale each example to its own '
    "largest score</label><span class='muted'>hover a word for its score (the sum of its tokens')"
    "</span></div>"
)


def document(title: str, body: Html, script: Html = Html()) -> str:
    """A complete HTML page: `body` under the shared stylesheet, `script` (JavaScript) at the end."""
    tail = markup("<script>{script}</script>", script=script) if script else Html()
    return markup(_SHELL, generator=Html(GENERATOR), title=title, style=Html(STYLE), body=body, tail=tail)


def view_controls() -> Html:
    """The switches: model tokens instead of words, each example scaled to its own largest score."""
    return Html(VIEW_CONTROLS)
