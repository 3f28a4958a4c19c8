"""The query layer: the language (parser), the workload it describes, and the compiled query
(automaton template, channels, windowing, time axis) that the engine runs. Imports nothing of the
engine, the core or the backends (docs/architecture.md)."""
