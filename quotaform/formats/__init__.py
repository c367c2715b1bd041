"""Versioned file formats: the JSON documents quotaform writes (plan, saved
plan, drift report, apply result, all-clusters report), their decoders, and
the JSON Schemas under ``schemas/`` generated from them (``python -m
quotaform.formats``)."""
