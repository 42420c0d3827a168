"""Tests of the content views (`addon/views.py`)."""
