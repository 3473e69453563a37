"""The composition root: wires adapters and services into a running platform."""
