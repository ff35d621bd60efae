"""The page of `fmm-fast explain --html`: a compact list of the examples and the selected one's details.

The list (index, label, prediction, probability, the text's start) filters by text and by wrong
predictions; a click, or the arrow keys, selects an example. The details show each measure as one row
over the example's words (or model tokens), coloured on the page's shared scale (see scale).
"""

from __future__ import annotations

from pathlib import Path

from fmm_fast.core.writing import write_text
from fmm_fast.protocols.explanations import Explanation
from fmm_fast.report.pages.document import document, view_controls
from fmm_fast.report.pages.examples import Example, example_section, group_examples, measure_scales
from fmm_fast.report.pages.markup import Html, join, markup
from fmm_fast.report.pages.scale import legend

SNIPPET = 80  # characters of an example's text in the list

SCRIPT = """
const rows=[...document.querySelectorAll('nav tbody tr')];
function select(id){rows.forEach(r=>r.classList.toggle('selected',r.dataset.id===id));
  const row=rows.find(r=>r.dataset.id===id);if(row)row.scrollIntoView({block:'nearest'});}
rows.forEach(r=>r.addEventListener('click',()=>{location.hash=r.dataset.id;}));
addEventListener('hashchange',()=>select(location.hash.slice(1)));
const query=document.getElementById('filter'),wrong=document.getElementById('wrong-only');
function filter(){const q=query.value.toLowerCase();
  rows.forEach(r=>{r.hidden=!r.textContent.toLowerCase().includes(q)||(wrong.checked&&!r.classList.contains('is-wrong'));});}
query.addEventListener('input',filter);wrong.addEventListener('change',filter);
addEventListener('keydown',e=>{if(e.target.type==='search'||!['ArrowDown','ArrowUp'].includes(e.key))return;
  const shown=rows.filter(r=>!r.hidden);if(!shown.length)return;
  let i=shown.findIndex(r=>r.classList.contains('selected'));
  i=Math.max(0,Math.min(shown.length-1,i+(e.key==='ArrowDown'?1:-1)));
  location.hash=shown[i].dataset.id;e.preventDefault();});
select(location.hash.slice(1)||(rows.length?rows[0].dataset.id:''));
"""


def _list_row(example: Example) -> Html:
    first = example.first
    kind, mark = ("right", "✓") if example.correct else ("wrong", "✗")
    return markup(
        '<tr data-id="ex-{index}" class="is-{kind}"><td>{index}</td><td>{label}</td>'
        '<td class="{kind}">{prediction} {mark}</td><td>{probability}</td>'
        '<td class="snippet"><a href="#ex-{index}">{text}</a></td></tr>',
        index=example.index,
        kind=kind,
        label=first.label,
        prediction=first.prediction,
        mark=mark,
        probability="" if first.probability is None else f"{first.probability:.2f}",
        text=first.text if len(first.text) <= SNIPPET else first.text[: SNIPPET - 1] + "…",
    )


LISTING = (
    '<nav><div class="filters"><input type="search" id="filter" placeholder="filter by text"> '
    '<label><input type="checkbox" id="wrong-only"> wrong predictions only</label></div>'
    "<table><thead><tr><th>#</th><th>label</th><th>prediction</th><th>p</th><th>text</th></tr></thead>"
    "<tbody>{rows}</tbody></table></nav>"
)


def explanations_page(explanations: list[Explanation], about: list[str]) -> str:
    """The whole page. about: lines describing the run (model, dataset, measures), shown as given."""
    examples = group_examples(explanations)
    scales = measure_scales(examples)
    header = markup(
        "<header><h1>fmm-fast explanations</h1>{about}"
        '<div class="muted">{count} examples, {wrong} predicted wrongly; measures: {measures}</div>'
        '{controls}<div class="legends">{legends}</div></header>',
        about=join(markup('<div class="muted">{line}</div>', line=line) for line in about),
        count=len(examples),
        wrong=sum(not e.correct for e in examples),
        measures=", ".join(scales),
        controls=view_controls(),
        legends=join(legend(s) for s in scales.values()),
    )
    body = markup(
        '{header}<div class="layout">' + LISTING + '<main class="browser">{details}</main></div>',
        header=header,
        rows=join(_list_row(e) for e in examples),
        details=join(example_section(e, scales) for e in examples),
    )
    return document("fmm-fast explanations", body, Html(SCRIPT))


def write_explanations_page(path: Path, explanations: list[Explanation], about: list[str]) -> None:
    write_text(path, explanations_page(explanations, about))
