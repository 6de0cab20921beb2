"""Rollups: per (pipeline, variant, week, month) sums that org-wide readers add up."""
