"""Several launches on one system at once, and every placement of one launch.

A layer above the schedule IR, beside gate/: `deployment.py` (a frozen `Deployment` of
schedules), `separation.py` (the cross-launch check: no launch uses an endpoint or a link
of another), `verify.py` and `simulate.py` (each launch's properties plus separation; one
timing run of all launches together), `launches_file.py` (`--launches FILE`),
`placements.py` (`meshproof placements`: every cube_start of one launch), with
`relocation.py` and `placement_trace.py` (a schedule moved to another placement, and when
that is sound). Normative text: spec/deployments.md.
"""
