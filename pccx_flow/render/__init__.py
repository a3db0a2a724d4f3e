"""Pictures of a decode step: Graphviz renders of the DAG and Gantt charts of a schedule.

- `dag`: the DAG clustered by layer and block, coloured by lane class, critical path bold;
- `collapse`: folding tiles, blocks or layers so a picture stays readable;
- `gantt`: one row per lane, bars coloured by block: the chart's data, and `write_gantt`
  (Bokeh HTML via `gantt_bokeh`, matplotlib SVG/PNG via `gantt_mpl`);
- `style`: the shared lane / block / op palette;
- `dot`: finding Graphviz and running it with a timeout.
"""

from pccx_flow.render.collapse import LEVELS, collapse, pick_level
from pccx_flow.render.dag import DagPicture, build_dag_picture, write_dag
from pccx_flow.render.gantt import write_gantt

__all__ = [
    "LEVELS",
    "DagPicture",
    "build_dag_picture",
    "collapse",
    "pick_level",
    "write_dag",
    "write_gantt",
]
