"""HTML pages people read: the explanations page of `fmm-fast explain --html` and the self-contained
`fmm-fast report --html`.

Plain HTML and CSS with a little inline JavaScript; nothing is fetched (no framework, font or server).
`units` turns an explanation into what the page colours (words of the text, or model tokens), `scale`
holds the palettes and the shared colour scale with its legend, `examples` renders one example's rows
(one per measure), `document` the page shell and its stylesheet, `explain_page` and `report_page` the
two pages (`markdown` turns the report's tables into HTML); `browser` renders a page in headless Chromium.
"""
