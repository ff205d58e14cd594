"""Exports of autoparser's analysis to the formats other engines consume."""
