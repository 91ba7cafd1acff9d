"""What a design costs: die area and build cost of any GpuSpec, and $ and CO2 per token (DESIGN 15).

facts.py      the dated, ranged, sourced constants (`data/cost_facts.yaml`), scenarios and overrides
area.py       die area from components, anchored to published areas
build.py      die, memory, package and board cost; purchase price; embodied carbon
operation.py  owner and renter $/GPU-hour, $/Mtoken, gCO2/token; `cost_outputs` (the JSON keys)
"""
