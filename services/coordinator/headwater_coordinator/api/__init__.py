"""The coordinator's HTTP routes: thin FastAPI handlers over ``coordinator.Coordinator``."""
