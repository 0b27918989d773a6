"""Tests of the market prices area."""
