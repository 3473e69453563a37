"""What travels on the bus between gateway, bridge and workers."""
