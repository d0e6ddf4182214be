"""A network guard for tests: loopback only, every other attempt refused and logged."""
