"""The engine layer: events in, then partition / pane / burst layout, the optimizer's sharing
decisions, execution through the Backend interface, and result tables out
(docs/architecture.md)."""
