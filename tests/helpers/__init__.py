"""Helpers shared by the test suites (unit, engine, e2e); test modules import from here, never from each other."""
