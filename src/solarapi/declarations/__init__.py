"""Declarations."""
