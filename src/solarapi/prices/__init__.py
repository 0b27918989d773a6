"""Prices."""
