"""Serialization: the user's columns turned into the bytes of Kafka keys and values.

Avro, JSON Schema and Protobuf in the Schema Registry's wire format (magic byte 0, the schema's
4-byte big-endian id, Protobuf's message indexes, then the encoded data), encoded from whole
Arrow columns.  It sits above the
producer, which stays format-agnostic, and below the Spark sink, which plans (schemas derived
and registered on the driver) and encodes (in each task) with it.
"""
