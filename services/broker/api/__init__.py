"""The broker's HTTP routes: thin FastAPI handlers over :class:`services.broker.broker.Broker`."""
