"""The group coordinator service: consumer groups, server-side assignment, committed offsets."""
