"""Conformance data shared by every engine that implements a Kafka rule."""
