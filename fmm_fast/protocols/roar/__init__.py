"""Recursive ROAR (erasure with retraining at every step; the method's predecessor and baseline).

masking: one step's masking of a dataset by an importance ranking, its digest and file; explaining: a
measure's scores on every split; steps: the files and records of one step; chain: the steps of one
(seed, measure); run: the whole run (step 0, the shared fully masked step, the chains, the no-retraining
erasure, result.json); result: result.json from the step records.
"""
