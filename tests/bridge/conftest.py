"""Fixtures for the bridge tests: the brokers of the broker tests."""

from tests.broker.conftest import make_client, mosquitto, running_broker

__all__ = ["make_client", "mosquitto", "running_broker"]
