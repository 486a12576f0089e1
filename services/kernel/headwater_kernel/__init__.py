"""The server kernel every service shares: app factory, errors, health, metrics, logs, settings."""
