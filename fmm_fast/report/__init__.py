"""`fmm-fast report`: aggregate evaluation result files into tables, curve figures and JSON (method.md §5).

Every `result.json` (kind "evaluate") is one seed sample of one (dataset, strategy). The report reads the
per-seed ACU/RACU, curves and timings written there and only aggregates them: mean and 95% BCa bootstrap CI
across seeds, after dropping bAbI seeds that did not converge.

One module per step: `load` reads result files, `aggregate` groups and summarises them, `tables` renders
Markdown and LaTeX, `plots` draws the figures (erasure curves, MaSF p-values), `write` puts it all on disk.
`order` holds the canonical measure and strategy order they share. `peer` renders the peer metrics
(docs/method.md §8) of `fmm-fast aopc` (kind "peer-metrics") as their own table, `masf` the verdicts of
`fmm-fast masf` runs. ROAR runs (`fmm-fast roar`, "protocol": "roar") are read by `load` too; `roar`
aggregates them beside the no-retraining erasure of the same measures and `roar_tables` renders that and the
two protocols' cost. `pages` builds the HTML pages people read (`fmm-fast explain --html`, `fmm-fast report
--html`).
"""
