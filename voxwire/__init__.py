"""voxwire: speech to text, delivered over MQTT."""

__version__ = "0.1.0"
