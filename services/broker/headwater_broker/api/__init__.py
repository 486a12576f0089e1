"""The broker's HTTP routes: thin FastAPI handlers over :class:`headwater_broker.broker.Broker`."""
