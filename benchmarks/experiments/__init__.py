"""One module per experiment of HAMLET section 6. Each has NAME, PAPER (the figures it
reproduces), FULL and QUICK sizes, and run(settings) -> result dict (JSON), plot(result, path),
table(result) -> Markdown, headline(result) -> its main ratios."""

from experiments import dynamic, events, hamlet_synthetic, queries, two_step

EXPERIMENTS = {m.NAME: m for m in (events, queries, dynamic, two_step, hamlet_synthetic)}
