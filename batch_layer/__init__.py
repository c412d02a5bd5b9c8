"""Batch layer (Lambda): recomputes the batch views from the whole master dataset up to a cutoff."""
