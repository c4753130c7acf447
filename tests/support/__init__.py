"""Helpers the test modules share (hand-made histories, their builders): a test module imports
helpers from here, never from another test module."""
