"""The coordinator's Redis storage: group state, member liveness, offsets, change notices."""
