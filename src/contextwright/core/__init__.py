"""The sans-I/O core: items, requests, plans, budget, the build pipeline, rendering, validation.

Nothing in this package reads a store, the network, a clock or the environment.
"""
