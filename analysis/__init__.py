"""The numbers Troupe draws conclusions from: docs/design.md §6 on plain metric series.

Every consumer — the Dash panel, the web pages, the live radar, the trainer's
`stop_after_cliff`, `python -m trainer analyze` and the tests — calls these functions, so a
"cliff" means the same thing everywhere (the rules and why: docs/analysis.md). The package
imports the standard library, numpy, scipy, pandas (the seed bands) and `vocabulary.names` (the
metric keys), never torch nor Django: the web process and the trainer both import it
(`tests/webapp/test_import_layers.py` checks). Inputs are plain sequences (NaN or None =
missing, dropped; steps need not be sorted; a step given twice keeps its last value); outputs
are plain Python values ready for `json.dumps` — dicts for what is stored and served — or
dataclasses with `as_dict()` where callers read fields.

One module per idea:

- `series`: cleaning and aligning series (`clean_series`, `as_step`, `as_number`, `EPS`);
- `intervals`: Student's t, Fisher's F and the normal from `scipy.special`
  (`student_t_quantile`, `f_sf`), `mean_ci`, the one interval method for means across seeds,
  and `Estimate`, the one shape of an estimate with its interval;
- `proportions`: intervals for rates (Wilson, Newcombe's paired difference, MOVER
  combinations) and the pairs McNemar's test needs;
- `cliffs`: base, peak, final, gains and the terminal-cliff verdict (`summarize_accuracy`,
  `describe_cliff`, and `cliff_label`: the verdict's words on every page);
- `amplification`: a role's gradient-norm onset (`amplification_verdict`, with "too few
  steps to judge"; `amplification_onset`, `planned_amplification`);
- `capture`: a role taking over a shared policy (`capture_verdict`, with "not enough steps
  yet"; `capture`, `capture_fractions`);
- `runs`: one run's summary (`summarize_run`), `RunSummary` to read it;
- `cells`: the seeds of one matrix cell (`summarize_cells`, `MIN_SEEDS`);
- `radar`: the same events while a run trains, each with its step;
- `stats`: the statistics page's effects across seeds (pooled only where the cells agree:
  `heterogeneity`), seeds needed and the lead test;
- `bands`: curves with seed bands; `smoothing`: display smoothing, which no verdict sees;
- `downsample`: the rule behind the metrics API's `max_points`.
"""
