"""Colours and fonts shared by the diagrams and figures.

Faults are the only thing drawn in pure `red` (`#ff0000` once rendered), so a test (or a
reader) can find them; nothing else uses that colour.
"""

from __future__ import annotations

FAULT = "red"
FAULT_FILL = "#ffe0e0"
NOTE = "#e07b00"            # context of a fault (e.g. the partner of a mismatched recv)
NOTE_FILL = "#fff1de"
MESSAGE = "#2b5fad"         # a delivered message
UNDELIVERED = "#8c8c8c"     # a message the run never delivers (the ranks deadlocked first)
LANE = "#9a9a9a"            # program order inside a lane
COMPUTE_TEXT = "#555555"
SEND_FILL = "#dfeaf8"
RECV_FILL = "#e3f3e1"
STORE_FILL = "#f1e6f7"
HEAD_FILL = "#f2f2f2"
LAUNCH_FILL = "#dcebfa"     # launched cubes in the topology diagram
IDLE_FILL = "#f7f7f7"
USED_LINK = "#2b5fad"
LINK = "#b4b4b4"
# Diagrams are laid out with DejaVu Sans, the widest face of the stack (graphviz knows its
# metrics), and the SVG asks for the stack: where DejaVu Sans is missing, the narrower
# Liberation Sans / Arial still fits every box. Helvetica alone is absent on most Linux
# machines, and its fallback overflowed the boxes laid out for it.
FONT = "DejaVu Sans"
FONT_STACK = "DejaVu Sans,Liberation Sans,Arial,Helvetica,sans-serif"
FONT_CSS = '"DejaVu Sans", "Liberation Sans", Arial, Helvetica, sans-serif'

# Figures (matplotlib): one colour per op-log series, colour-blind-safe (Okabe-Ito).
SERIES_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00",
                  "#F0E442", "#000000")
