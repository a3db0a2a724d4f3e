"""Hardware profiles of pccx v002 and the cost model that turns a DAG node into cycles.

`profile` loads a profile (a built-in name or a user's TOML file) into a frozen `Profile`;
`cost` gives each node its cycles on its lane class and the resource pools it holds.
Every time derived from them is a model estimate, never a measurement.
"""

from pccx_flow.hardware.cost import annotate_costs, cycles_to_seconds, node_cycles, node_resources
from pccx_flow.hardware.profile import Profile, list_profiles, load_profile

__all__ = [
    "Profile",
    "annotate_costs",
    "cycles_to_seconds",
    "list_profiles",
    "load_profile",
    "node_cycles",
    "node_resources",
]
